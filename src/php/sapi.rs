//! The end of a logical request, as the SAPI sees it: a hook in `sapi_module.deactivate`.
//!
//! Request shutdown (RSHUTDOWN) runs once per PHP request, but a long-running worker serves
//! many HTTP requests inside one PHP request: FrankenPHP's worker mode runs `sapi_activate()` and
//! `sapi_deactivate()` around each of them, without RSHUTDOWN. `sapi_deactivate()` also ends
//! every ordinary request (after RSHUTDOWN), under every SAPI, so the hook marks the end of a
//! logical request everywhere; whatever RSHUTDOWN released first is not released twice.

use super::worker;
use ext_php_rs::ffi::{ext_php_rs_sapi_module, MODULE_TEMPORARY};
use std::ffi::c_int;
use std::panic::catch_unwind;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

type Deactivate = unsafe extern "C" fn() -> c_int;

/// The handler the hook replaced (null: none), called after ours.
static PREVIOUS: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());

/// Puts the hook in `sapi_module.deactivate`, keeping the handler it replaces. Not for a
/// module loaded by `dl()` (`MODULE_TEMPORARY`), which is unloaded at the end of the request
/// while the SAPI would still call into it.
pub fn install(module_type: c_int) {
    if module_type == MODULE_TEMPORARY as c_int {
        return;
    }
    // SAFETY: called from module startup, on the main thread before any request runs, so
    // nothing reads `sapi_module` concurrently; the pointer is to PHP's static `sapi_module`.
    unsafe {
        let Some(module) = ext_php_rs_sapi_module().as_mut() else {
            return;
        };
        if hooked(module) {
            return; // started again in the same process (the hook is already ours)
        }
        let previous = module.deactivate.map_or(ptr::null_mut(), |f| f as *mut ());
        PREVIOUS.store(previous, Ordering::Release);
        module.deactivate = Some(deactivate);
    }
}

/// Puts back the handler [`install`] replaced, if the hook is still the current one (another
/// extension that hooked after us keeps its chain, which still reaches ours).
pub fn uninstall() {
    // SAFETY: called from module shutdown, after the last request of every thread.
    unsafe {
        let Some(module) = ext_php_rs_sapi_module().as_mut() else {
            return;
        };
        if hooked(module) {
            module.deactivate = previous();
            PREVIOUS.store(ptr::null_mut(), Ordering::Release);
        }
    }
}

/// Whether `module`'s deactivate handler is ours.
fn hooked(module: &ext_php_rs::ffi::sapi_module_struct) -> bool {
    let ours: Deactivate = deactivate;
    module
        .deactivate
        .is_some_and(|current| ptr::fn_addr_eq(current, ours))
}

fn previous() -> Option<Deactivate> {
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: `PREVIOUS` holds null or a `Deactivate` stored by `install`; function pointers
    // are pointer-sized.
    (!previous.is_null()).then(|| unsafe { std::mem::transmute::<*mut (), Deactivate>(previous) })
}

/// Ends the logical request's leases (see [`worker::end_request`]), then hands over to the
/// SAPI's own handler. A failure is left to the leases' expiry; a panic never reaches PHP.
unsafe extern "C" fn deactivate() -> c_int {
    let _ = catch_unwind(worker::end_request);
    // SAFETY: `sapi_deactivate_module` would have called the previous handler the same way.
    previous().map_or(0, |previous| unsafe { previous() })
}
