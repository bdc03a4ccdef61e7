//! The PHP glue: the ten functions, the module's startup, the end of a request and phpinfo().
//! Thin by design: it parses arguments, calls the [`crate::limiter::Limiter`], and builds a
//! Decision.

mod args;
mod compound;
mod decision;
mod error;
mod ini;
mod sapi;
mod worker;

use crate::core::bucket::{Kind, Policy, MAX_LIMIT};
use crate::core::decision::Ask;
use crate::core::lease::LeaseToken;
use crate::core::subject::{self, MAX_REQUEST_ID_LEN, MAX_SUBJECT_LEN};
use crate::core::top::TOP_MAX;
use args::{declare, param, Call, Param};
use decision::Decision;
use error::Error;
use ext_php_rs::builders::ClassBuilder;
use ext_php_rs::convert::IntoZval;
use ext_php_rs::flags::DataType;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::{ClassEntry, ExecuteData, ModuleEntry};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

const DECISION: &str = "RateLimit\\Decision";

static ACQUIRE: [Param; 9] = [
    param("subject", DataType::String, false, None),
    param("limit", DataType::Long, true, Some("null")),
    param("per", DataType::Double, true, Some("null")),
    param("inflight", DataType::Long, true, Some("null")),
    param("scope", DataType::String, false, Some("\"default\"")),
    param("cost", DataType::Long, false, Some("1")),
    param("request_id", DataType::String, true, Some("null")),
    param("policy", DataType::String, false, Some("\"token_bucket\"")),
    param("amount", DataType::Long, true, Some("null")),
];
static RESERVE: [Param; 8] = [
    param("subject", DataType::String, false, None),
    param("max_wait", DataType::Double, false, None),
    param("limit", DataType::Long, true, Some("null")),
    param("per", DataType::Double, true, Some("null")),
    param("scope", DataType::String, false, Some("\"default\"")),
    param("cost", DataType::Long, false, Some("1")),
    param("policy", DataType::String, false, Some("\"token_bucket\"")),
    param("amount", DataType::Long, true, Some("null")),
];
static ACQUIRE_ALL: [Param; 5] = [
    param("subject", DataType::String, false, None),
    param("limits", DataType::Array, false, None),
    param("cost", DataType::Long, false, Some("1")),
    param("inflight", DataType::Long, true, Some("null")),
    param("request_id", DataType::String, true, Some("null")),
];
static RELEASE: [Param; 1] = [param("lease", DataType::object(DECISION), false, None)];
static PEEK: [Param; 6] = [
    param("subject", DataType::String, false, None),
    param("limit", DataType::Long, true, Some("null")),
    param("per", DataType::Double, true, Some("null")),
    param("scope", DataType::String, false, Some("\"default\"")),
    param("policy", DataType::String, false, Some("\"token_bucket\"")),
    param("amount", DataType::Long, true, Some("null")),
];
static REFUND: [Param; 7] = [
    param("subject", DataType::String, false, None),
    param("cost", DataType::Long, false, Some("1")),
    param("limit", DataType::Long, true, Some("null")),
    param("per", DataType::Double, true, Some("null")),
    param("scope", DataType::String, false, Some("\"default\"")),
    param("policy", DataType::String, false, Some("\"token_bucket\"")),
    param("amount", DataType::Long, true, Some("null")),
];
static TOP: [Param; 1] = [param("n", DataType::Long, false, Some("10"))];
static RESET: [Param; 2] = [
    param("subject", DataType::String, false, None),
    param("scope", DataType::String, false, Some("\"default\"")),
];

/// Runs a handler body: errors become PHP exceptions, panics never cross into PHP.
fn guarded(retval: &mut Zval, body: impl FnOnce() -> Result<Zval, Error>) {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => *retval = value,
        Ok(Err(e)) => e.throw(),
        Err(_) => Error::Internal("a Rust panic was caught".into()).throw(),
    }
}

fn to_zval(value: impl IntoZval) -> Result<Zval, Error> {
    value
        .into_zval(false)
        .map_err(|e| Error::Internal(e.to_string()))
}

fn subject_arg(call: &Call, i: usize) -> Result<Vec<u8>, Error> {
    let s = call.string(i)?;
    if s.is_empty() {
        return Err(call.value_error(i, "must not be empty"));
    }
    if s.len() > MAX_SUBJECT_LEN {
        return Err(call.value_error(i, &format!("must be at most {MAX_SUBJECT_LEN} bytes long")));
    }
    Ok(s)
}

/// What an invalid scope is told.
fn scope_error() -> &'static str {
    "must be 1 to 64 characters of [A-Za-z0-9_.:-]"
}

/// What is wrong with `per` seconds, if anything (shared by `$per` and `$limits[i]["per"]`).
fn per_error(p: f64) -> Option<&'static str> {
    if !p.is_finite() {
        Some("must be a finite number")
    } else if p < 0.001 {
        Some("must be greater than or equal to 0.001")
    } else if p > 1e9 {
        Some("must be less than or equal to 1000000000")
    } else {
        None
    }
}

fn scope_arg(call: &Call, i: usize) -> Result<String, Error> {
    let s = call.string(i)?;
    if !subject::valid_scope(&s) {
        return Err(call.value_error(i, scope_error()));
    }
    Ok(String::from_utf8(s).expect("a valid scope is ASCII"))
}

/// `$limit` and `$per` at positions `i` and `i + 1`, null taking the php.ini defaults.
fn policy_args(
    call: &Call,
    i: usize,
    config: &crate::core::config::Config,
) -> Result<Policy, Error> {
    let limit = match call.long(i)? {
        None => config.limit,
        Some(l) if l < 1 => return Err(call.value_error(i, "must be greater than 0")),
        Some(l) if l as u64 > MAX_LIMIT => {
            return Err(call.value_error(i, &format!("must be less than or equal to {MAX_LIMIT}")))
        }
        Some(l) => l as u64,
    };
    let per_ms = match call.double(i + 1)? {
        None => config.per_ms,
        Some(p) => match per_error(p) {
            Some(what) => return Err(call.value_error(i + 1, what)),
            None => Policy::per_ms_from_seconds(p).expect("bounds checked above"),
        },
    };
    Policy::new(limit, per_ms).map_err(|e| Error::Internal(format!("{e:?}")))
}

/// What an unknown policy name is told (str_pad()'s wording for its modes).
pub(crate) fn policy_error() -> String {
    let names: Vec<String> = Kind::ALL
        .iter()
        .map(|k| format!("\"{}\"", k.as_str()))
        .collect();
    format!(
        "must be {}, or {}",
        names[..names.len() - 1].join(", "),
        names[names.len() - 1]
    )
}

/// `$policy` at position `i`: how the limit counts (`token_bucket` when omitted).
fn kind_arg(call: &Call, i: usize) -> Result<Kind, Error> {
    let name = call.string(i)?;
    Kind::from_name(&name).ok_or_else(|| call.value_error(i, &policy_error()))
}

/// `$amount` at position `i` onto `policy` (whose kind `$policy`, at position `kind_at`, set):
/// a stepped bucket's tokens per step, `$limit` when null; any other policy takes none.
fn amount_arg(call: &Call, i: usize, kind_at: usize, policy: Policy) -> Result<Policy, Error> {
    match (call.long(i)?, policy.kind()) {
        (None, _) => Ok(policy),
        (Some(_), k) if k != Kind::SteppedBucket => Err(call.value_error(
            i,
            &format!(
                "must be null unless argument #{} ($policy) is \"stepped_bucket\"",
                kind_at + 1
            ),
        )),
        (Some(a), _) if a < 1 => Err(call.value_error(i, "must be greater than 0")),
        (Some(a), _) => policy.with_amount(a as u64).map_err(|_| {
            call.value_error(i, &format!("must be less than or equal to {MAX_LIMIT}"))
        }),
    }
}

fn request_id_arg(call: &Call, i: usize) -> Result<Option<Vec<u8>>, Error> {
    match call.nullable_string(i)? {
        Some(id) if id.is_empty() => Err(call.value_error(i, "must not be empty")),
        Some(id) if id.len() > MAX_REQUEST_ID_LEN => Err(call.value_error(
            i,
            &format!("must be at most {MAX_REQUEST_ID_LEN} bytes long"),
        )),
        other => Ok(other),
    }
}

fn inflight_arg(call: &Call, i: usize, default: u64) -> Result<u64, Error> {
    match call.long(i)? {
        None => Ok(default),
        Some(n) if n < 0 => Err(call.value_error(i, "must be greater than or equal to 0")),
        Some(n) => Ok(n as u64),
    }
}

extern "C" fn ratelimit_acquire_all(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_acquire_all", &ACQUIRE_ALL)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        let limits = compound::limits_arg(&call, 1)?;
        let smallest = limits.iter().map(|l| l.policy.limit()).min().unwrap_or(0);
        let cost =
            match call.long(2)?.unwrap_or(1) {
                c if c < 1 => return Err(call.value_error(2, "must be greater than 0")),
                c if c as u64 > smallest => return Err(call.value_error(
                    2,
                    "must be less than or equal to the smallest \"limit\" of argument #2 ($limits)",
                )),
                c => c as u64,
            };
        let max_inflight = inflight_arg(&call, 3, config.inflight)?;
        let request_id = request_id_arg(&call, 4)?;
        let asks: Vec<Ask> = limits
            .iter()
            .enumerate()
            .map(|(i, l)| Ask::new(l.policy, cost, if i == 0 { max_inflight } else { 0 }))
            .collect();
        let scopes: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
        let acquired = worker::with(&config, |l| {
            l.acquire_all(&subject, &scopes, &asks, request_id.as_deref())
                .map_err(Error::Store)
        })?;
        let members = limits
            .into_iter()
            .zip(acquired.each)
            .map(|(l, v)| (l.scope, l.policy, v))
            .collect();
        to_zval(Decision::compound(
            acquired.verdict,
            members,
            acquired.reported,
            acquired.lease,
        ))
    })
}

extern "C" fn ratelimit_acquire(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_acquire", &ACQUIRE)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        let policy = policy_args(&call, 1, &config)?;
        let max_inflight = inflight_arg(&call, 3, config.inflight)?;
        let scope = scope_arg(&call, 4)?;
        let cost = match call.long(5)?.unwrap_or(1) {
            c if c < 1 => return Err(call.value_error(5, "must be greater than 0")),
            c if c as u64 > policy.limit() => {
                return Err(
                    call.value_error(5, "must be less than or equal to argument #2 ($limit)")
                )
            }
            c => c as u64,
        };
        let request_id = request_id_arg(&call, 6)?;
        let policy = amount_arg(&call, 8, 7, policy.with_kind(kind_arg(&call, 7)?))?;
        let ask = Ask::new(policy, cost, max_inflight);
        let acquired = worker::with(&config, |l| {
            l.acquire_request(&subject, &scope, &ask, request_id.as_deref())
                .map_err(Error::Store)
        })?;
        to_zval(Decision::new(
            acquired.verdict,
            &policy,
            scope,
            acquired.lease,
        ))
    })
}

/// `$max_wait` seconds as whole milliseconds, rounded down so that no booking waits longer
/// than asked; INF is any wait (a forced charge). Negative or NAN: the caller's error.
fn max_wait_arg(call: &Call, i: usize) -> Result<u64, Error> {
    crate::core::decision::max_wait_ms(call.double(i)?.unwrap_or(f64::NAN))
        .ok_or_else(|| call.value_error(i, "must be greater than or equal to 0"))
}

extern "C" fn ratelimit_reserve(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_reserve", &RESERVE)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        let max_wait_ms = max_wait_arg(&call, 1)?;
        let policy = policy_args(&call, 2, &config)?;
        let scope = scope_arg(&call, 4)?;
        let kind = kind_arg(&call, 6)?;
        // A fixed window counts a cost past `$limit` (Laravel's increment by more than its
        // maximum does); the others never hold it (Symfony's reserve() throws).
        let most = match kind {
            Kind::FixedWindow => MAX_LIMIT,
            Kind::TokenBucket | Kind::SlidingWindow | Kind::SteppedBucket => policy.limit(),
        };
        let cost = match call.long(5)?.unwrap_or(1) {
            c if c < 1 => return Err(call.value_error(5, "must be greater than 0")),
            c if c as u64 > most && kind == Kind::FixedWindow => {
                return Err(
                    call.value_error(5, &format!("must be less than or equal to {MAX_LIMIT}"))
                )
            }
            c if c as u64 > most => {
                return Err(call.value_error(
                    5,
                    "must be less than or equal to argument #3 ($limit) unless argument #7 \
                     ($policy) is \"fixed_window\"",
                ))
            }
            c => c as u64,
        };
        let policy = amount_arg(&call, 7, 6, policy.with_kind(kind))?;
        let ask = Ask::new(policy, cost, 0).reserving(max_wait_ms);
        let acquired = worker::with(&config, |l| {
            l.acquire_request(&subject, &scope, &ask, None)
                .map_err(Error::Store)
        })?;
        to_zval(Decision::new(acquired.verdict, &policy, scope, None))
    })
}

/// The lease named by `ratelimit_release()`'s argument: a Decision's, or a string's.
fn lease_arg(call: &Call) -> Result<Option<LeaseToken>, Error> {
    let z = call
        .raw(0)
        .ok_or_else(|| Error::Internal("missing argument".into()))?;
    let text = if let Some(obj) = z.object() {
        let Some(d) = <&ext_php_rs::types::ZendClassObject<Decision> as ext_php_rs::convert::FromZendObject>::from_zend_object(obj).ok() else {
            return Err(call.type_error_text(0, "RateLimit\\Decision|string"));
        };
        return Ok(d.lease());
    } else if let Some(s) = z.zend_str() {
        s.as_bytes().to_vec()
    } else {
        call.string_weak(0)
            .ok_or_else(|| call.type_error_text(0, "RateLimit\\Decision|string"))?
    };
    LeaseToken::parse(&text)
        .map(Some)
        .ok_or_else(|| call.value_error(0, "must be a lease returned by ratelimit_acquire()"))
}

extern "C" fn ratelimit_release(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_release", &RELEASE)?;
        let Some(token) = lease_arg(&call)? else {
            return to_zval(false);
        };
        let config = ini::config();
        let freed = worker::with(&config, |l| l.release(&token).map_err(Error::Store))?;
        to_zval(freed)
    })
}

extern "C" fn ratelimit_peek(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_peek", &PEEK)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        let policy = policy_args(&call, 1, &config)?;
        let scope = scope_arg(&call, 3)?;
        let policy = amount_arg(&call, 5, 4, policy.with_kind(kind_arg(&call, 4)?))?;
        let verdict = worker::with(&config, |l| {
            l.peek(&subject, &scope, &policy).map_err(Error::Store)
        })?;
        to_zval(Decision::new(verdict, &policy, scope, None))
    })
}

extern "C" fn ratelimit_refund(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_refund", &REFUND)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        // Past `$limit` is accepted: a window may count past its limit (bookings, Laravel's
        // counts), and a token bucket is filled up to its capacity at most.
        let cost = match call.long(1)?.unwrap_or(1) {
            c if c < 1 => return Err(call.value_error(1, "must be greater than 0")),
            c if c as u64 > MAX_LIMIT => {
                return Err(
                    call.value_error(1, &format!("must be less than or equal to {MAX_LIMIT}"))
                )
            }
            c => c as u64,
        };
        let policy = policy_args(&call, 2, &config)?;
        let scope = scope_arg(&call, 4)?;
        let policy = amount_arg(&call, 6, 5, policy.with_kind(kind_arg(&call, 5)?))?;
        let given = worker::with(&config, |l| {
            l.refund(&subject, &scope, &policy, cost)
                .map_err(Error::Store)
        })?;
        to_zval(given)
    })
}

extern "C" fn ratelimit_reset(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_reset", &RESET)?;
        let config = ini::config();
        let subject = subject_arg(&call, 0)?;
        let scope = scope_arg(&call, 1)?;
        let forgot = worker::with(&config, |l| l.reset(&subject, &scope).map_err(Error::Store))?;
        to_zval(forgot)
    })
}

extern "C" fn ratelimit_stats(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        Call::new(ex, "ratelimit_stats", &[])?;
        let config = ini::config();
        let s = worker::with(&config, |l| l.stats().map_err(Error::Store))?;
        let internal = |e: ext_php_rs::error::Error| Error::Internal(e.to_string());
        let mut table = ZendHashTable::new();
        let gauges = [("entries", s.entries), ("live_leases", s.live_leases)];
        for (name, value) in s.counters.named().into_iter().chain(gauges) {
            table.insert(name, value as i64).map_err(internal)?;
        }
        table
            .insert("backend", config.backend.as_str())
            .map_err(internal)?;
        if config.backend.as_str() == "redis" {
            // Whether decisions use the module's native commands or the scripts (issue 24).
            table
                .insert("redis_path", crate::storage::redis::path_name())
                .map_err(internal)?;
        }
        table
            .insert("breaker", breaker_state(&s).as_str())
            .map_err(internal)?;
        table.insert("partial", s.partial).map_err(internal)?;
        to_zval(table)
    })
}

/// The breaker's state as `ratelimit_stats()` says it: "closed" for a store without one.
fn breaker_state(s: &crate::storage::Stats) -> crate::core::breaker::BreakerState {
    s.breaker
        .unwrap_or(crate::core::breaker::BreakerState::Closed)
}

extern "C" fn ratelimit_metrics(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        Call::new(ex, "ratelimit_metrics", &[])?;
        let config = ini::config();
        let s = worker::with(&config, |l| l.stats().map_err(Error::Store))?;
        to_zval(crate::core::metrics::render(
            &s,
            config.backend.as_str(),
            env!("CARGO_PKG_VERSION"),
        ))
    })
}

/// Milliseconds since the epoch as PHP's `microtime(true)` gives seconds.
fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

extern "C" fn ratelimit_top(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        let call = Call::new(ex, "ratelimit_top", &TOP)?;
        let n = match call.long(0)?.unwrap_or(10) {
            n if !(1..=TOP_MAX as i64).contains(&n) => {
                return Err(call.value_error(0, &format!("must be between 1 and {TOP_MAX}")))
            }
            n => n as usize,
        };
        let config = ini::config();
        let views = worker::with(&config, |l| l.top(n).map_err(Error::Store))?;
        let internal = |e: ext_php_rs::error::Error| Error::Internal(e.to_string());
        let mut list = ZendHashTable::new();
        for v in views {
            let mut row = ZendHashTable::new();
            row.insert("pseudonym", v.hex()).map_err(internal)?;
            row.insert("tokens", v.tokens_milli as f64 / 1000.0)
                .map_err(internal)?;
            row.insert("stamp", seconds(v.stamp_ms)).map_err(internal)?;
            row.insert("full_at", seconds(v.full_at_ms))
                .map_err(internal)?;
            row.insert("used_at", seconds(v.used_at_ms))
                .map_err(internal)?;
            let counts = [
                ("denied", v.denials()),
                ("denied_rate", v.denied_rate),
                ("denied_inflight", v.denied_inflight),
                ("allowed", v.allowed),
                ("live_leases", v.live_leases),
            ];
            for (name, value) in counts {
                row.insert(name, value as i64).map_err(internal)?;
            }
            list.push(row).map_err(internal)?;
        }
        to_zval(list)
    })
}

/// `ratelimit_end_request(): int`: ends the leases the current logical request still holds,
/// for a long-running worker whose HTTP requests all run inside one PHP request (RoadRunner,
/// Swoole, Laravel Octane): returns how many were live. Opens nothing.
extern "C" fn ratelimit_end_request(ex: &mut ExecuteData, retval: &mut Zval) {
    guarded(retval, || {
        Call::new(ex, "ratelimit_end_request", &[])?;
        to_zval(worker::end_request().min(i64::MAX as u64) as i64)
    })
}

/// Releases what the request's script forgot to (also after a fatal error). A failure here
/// is left to the lease's expiry: there is nobody left to tell.
unsafe extern "C" fn request_shutdown(_type: i32, _module_number: i32) -> i32 {
    let _ = catch_unwind(worker::end_request);
    0
}

/// Takes the request-end hook out of the SAPI. The counts each worker still holds back are
/// written by the module's globals' destructor (GSHUTDOWN, see `worker::Globals`), which runs
/// after this, for each thread still alive (without ZTS, for the process).
unsafe extern "C" fn module_shutdown(_type: i32, _module_number: i32) -> i32 {
    let _ = catch_unwind(sapi::uninstall);
    0
}

// SAFETY (for the extern statics and functions below): all are exported by every PHP 8 binary
// with these types; they are only read during module startup and phpinfo().
unsafe extern "C" {
    static spl_ce_RuntimeException: *mut ClassEntry;
    fn display_ini_entries(module: *mut ModuleEntry);
}

fn runtime_exception() -> &'static ClassEntry {
    // SAFETY: SPL is always compiled in and starts before extensions, so this is set.
    unsafe { &*spl_ce_RuntimeException }
}

fn register_exception_class() -> ext_php_rs::error::Result<()> {
    ClassBuilder::new("RateLimit\\Exception")
        .extends((runtime_exception, "RuntimeException"))
        .registration(|ce, tables| {
            std::mem::forget(tables);
            error::EXCEPTION_CE.store(ce, Ordering::Release);
        })
        .register()
}

/// Declares `ratelimit_release(RateLimit\Decision|string $lease)`: ext-php-rs builds the class
/// part of the type; the string part is one bit in the registered argument info.
fn widen_release_arg_to_string() {
    let name = "ratelimit_release";
    // SAFETY: during module startup, single-threaded; the function was registered just before
    // this callback with one argument, whose info PHP owns for the life of the process.
    unsafe {
        let Some(globals) = ext_php_rs::ffi::ext_php_rs_compiler_globals().as_ref() else {
            return;
        };
        let Some(table) = globals.function_table.as_ref() else {
            return;
        };
        let found = ext_php_rs::ffi::zend_hash_str_find(table, name.as_ptr().cast(), name.len());
        let Some(zv) = found.as_ref() else { return };
        let Some(f) = zv
            .value
            .ptr
            .cast::<ext_php_rs::ffi::zend_function>()
            .as_mut()
        else {
            return;
        };
        if let Some(arg) = f.common.arg_info.as_mut() {
            arg.type_.type_mask |= 1 << ext_php_rs::ffi::IS_STRING;
        }
    }
}

fn startup(ty: i32, module_number: i32) -> i32 {
    catch_unwind(|| {
        ini::register(module_number);
        widen_release_arg_to_string();
        sapi::install(ty);
        match register_exception_class() {
            Ok(()) => 0,
            Err(e) => {
                ini::warn(&format!(
                    "ratelimit: cannot register RateLimit\\Exception: {e}"
                ));
                -1
            }
        }
    })
    .unwrap_or(-1)
}

extern "C" fn info(module: *mut ModuleEntry) {
    let _ = catch_unwind(|| {
        let (db, key) = worker::paths(&ini::config());
        ext_php_rs::info_table_start!();
        ext_php_rs::info_table_row!("ratelimit support", "enabled");
        ext_php_rs::info_table_row!("Version", env!("CARGO_PKG_VERSION"));
        for (name, value) in crate::stack::info() {
            ext_php_rs::info_table_row!(name, value);
        }
        ext_php_rs::info_table_row!("Database", db.display().to_string());
        ext_php_rs::info_table_row!("Key file", key.display().to_string());
        // Read here only (no store is opened): the value for ratelimit.key_fingerprint.
        let fp = crate::keyring::short_fingerprint(&key).unwrap_or_else(|e| e.to_string());
        ext_php_rs::info_table_row!("Key fingerprint", fp);
        ext_php_rs::info_table_end!();
    });
    // SAFETY: PHP passes this module's own entry.
    unsafe { display_ini_entries(module) };
}

#[php_module]
#[php(startup = startup)]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    let obj = DataType::object(DECISION);
    module
        .class::<Decision>()
        .function(declare(
            "ratelimit_acquire",
            ratelimit_acquire,
            &ACQUIRE,
            obj,
        ))
        .function(declare(
            "ratelimit_reserve",
            ratelimit_reserve,
            &RESERVE,
            obj,
        ))
        .function(declare(
            "ratelimit_acquire_all",
            ratelimit_acquire_all,
            &ACQUIRE_ALL,
            obj,
        ))
        .function(declare(
            "ratelimit_release",
            ratelimit_release,
            &RELEASE,
            DataType::Bool,
        ))
        .function(declare("ratelimit_peek", ratelimit_peek, &PEEK, obj))
        .function(declare(
            "ratelimit_refund",
            ratelimit_refund,
            &REFUND,
            DataType::Bool,
        ))
        .function(declare(
            "ratelimit_reset",
            ratelimit_reset,
            &RESET,
            DataType::Bool,
        ))
        .function(declare(
            "ratelimit_stats",
            ratelimit_stats,
            &[],
            DataType::Array,
        ))
        .function(declare(
            "ratelimit_metrics",
            ratelimit_metrics,
            &[],
            DataType::String,
        ))
        .function(declare(
            "ratelimit_top",
            ratelimit_top,
            &TOP,
            DataType::Array,
        ))
        .function(declare(
            "ratelimit_end_request",
            ratelimit_end_request,
            &[],
            DataType::Long,
        ))
        .globals(&worker::GLOBALS)
        .request_shutdown_function(request_shutdown)
        .shutdown_function(module_shutdown)
        .info_function(info)
}
