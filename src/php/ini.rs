//! The `ratelimit.*` directives of `core::config`'s table, registered with PHP and mirrored into
//! a parsed [`Config`].
//!
//! Each directive has an `on_modify` callback, so the parsed value is current however it was
//! set: php.ini, `-d`, or an FPM pool's `php_admin_value` (applied in each child after fork).
//! Reading the configuration on the hot path is then a lock and a clone, not an ini scan.

use crate::core::config::{shown, Config, Directive, REDIS, SHARED, SQLITE};
use ext_php_rs::ffi::{php_error_docref, zend_ini_entry, zend_string, E_WARNING};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::types::ZendStr;
use ext_php_rs::zend::{IniEntryDef, IniEntryDefs};
use std::ffi::{c_int, c_void, CString};
use std::sync::{Arc, Mutex};

/// Replaced (never mutated) on each change, so a holder of the `Arc` can tell by pointer
/// whether anything changed since it looked.
static CONFIG: Mutex<Option<Arc<Config>>> = Mutex::new(None);

/// The configuration now in force.
pub fn config() -> Arc<Config> {
    let mut guard = CONFIG.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .get_or_insert_with(|| Arc::new(Config::defaults()))
        .clone()
}

const fn entry(d: &Directive) -> IniEntryDef {
    let mut e = IniEntryDef::new(d.name, d.default, IniEntryPermission::System);
    e.on_modify = Some(on_modify);
    e
}

const COUNT: usize = SHARED.len() + SQLITE.len() + REDIS.len();

/// The table PHP keeps for the life of the process: every directive, then the end marker.
static ENTRIES: IniEntryDefs<{ COUNT + 1 }> = IniEntryDefs::new(entries());

const fn entries() -> [IniEntryDef; COUNT + 1] {
    let mut out = [IniEntryDef::end(); COUNT + 1];
    let mut i = 0;
    while i < SHARED.len() {
        out[i] = entry(&SHARED[i]);
        i += 1;
    }
    let mut j = 0;
    while j < SQLITE.len() {
        out[SHARED.len() + j] = entry(&SQLITE[j]);
        j += 1;
    }
    let mut k = 0;
    while k < REDIS.len() {
        out[SHARED.len() + SQLITE.len() + k] = entry(&REDIS[k]);
        k += 1;
    }
    out
}

/// Registers the directives; call from module startup.
pub fn register(module_number: i32) {
    IniEntryDef::register(ENTRIES.as_slice(), module_number);
}

fn zstr(s: *mut zend_string) -> Option<Vec<u8>> {
    // SAFETY: PHP passes either null or a valid zend_string that outlives this call.
    let s = unsafe { s.cast::<ZendStr>().as_ref() }?;
    Some(s.as_bytes().to_vec())
}

/// Parses and stores a new value. A value that cannot work is taken as written and marks its
/// directive broken (see [`Config::apply`]): a startup warning names it, and every call throws
/// until it is fixed; no other value (not even the default) stands in for it. Taking it (not
/// failing the ini entry) keeps the bad value in force everywhere PHP re-applies it, e.g. at a
/// ZTS thread's start. A value equal to the one in force keeps the same `Arc` (see
/// [`Config::applied`]), so that nothing that compares configurations by pointer reopens.
unsafe extern "C" fn on_modify(
    entry: *mut zend_ini_entry,
    new_value: *mut zend_string,
    _: *mut c_void,
    _: *mut c_void,
    _: *mut c_void,
    _stage: c_int,
) -> c_int {
    // A panic must not unwind into PHP: treat it as a refusal.
    std::panic::catch_unwind(|| {
        // SAFETY: PHP passes the entry being modified; its name is a valid zend_string.
        let name = unsafe { entry.as_ref() }
            .and_then(|e| zstr(e.name))
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .unwrap_or_default();
        let raw = zstr(new_value).unwrap_or_default();
        let mut guard = CONFIG.lock().unwrap_or_else(|e| e.into_inner());
        let (config, result) = Config::applied_bytes(guard.as_ref(), &name, &raw);
        let same = guard.as_ref().is_some_and(|c| Arc::ptr_eq(c, &config));
        // Said once: not again when a ZTS thread's start applies the same value.
        if let (Err(why), false) = (result, same) {
            warn(&format!(
                "Invalid value {} for {name} ({}); every ratelimit call throws until it is fixed",
                shown(&name, &String::from_utf8_lossy(&raw)),
                why.0
            ));
        }
        *guard = Some(config);
        0
    })
    .unwrap_or(-1)
}

unsafe extern "C" {
    /// PHP's error log (the `error_log` destination, else the SAPI's log), never the response.
    /// Exported by every PHP 8 binary.
    fn php_log_err_with_severity(message: *const std::ffi::c_char, syslog_type: c_int);
}

/// syslog's LOG_NOTICE.
const LOG_NOTICE: c_int = 5;

/// One line of the operations log, into PHP's error log.
pub fn log_error(message: &str) {
    let Ok(msg) = CString::new(message.replace('\0', "")) else {
        return;
    };
    // SAFETY: a NUL-terminated string that outlives the call; PHP copies what it keeps. Only
    // called from a PHP call or request shutdown, on the thread that runs the request.
    unsafe { php_log_err_with_severity(msg.as_ptr(), LOG_NOTICE) };
}

/// A PHP warning (at startup: "PHP Warning: PHP Startup: ...").
pub fn warn(message: &str) {
    let Ok(msg) = CString::new(message.replace('\0', "")) else {
        return;
    };
    // SAFETY: a printf-style call with one "%s" and one NUL-terminated string argument.
    unsafe {
        php_error_docref(
            std::ptr::null(),
            E_WARNING as i32,
            c"%s".as_ptr(),
            msg.as_ptr(),
        )
    };
}
