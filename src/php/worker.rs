//! What one PHP process keeps between calls: the open store and the key, opened lazily on the
//! first call (never in module startup, which under FPM runs in the master before fork) and
//! reopened when the process finds itself forked; and the leases the current request holds.

use crate::core::config::Config;
use crate::core::lease::LeaseId;
use crate::core::subject::Pseudonymizer;
use crate::keyfile;
use crate::php::error::Error;
use crate::storage::sqlite::SqliteStore;
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Worker {
    pid: u32,
    /// The configuration this worker was opened with.
    config: Arc<Config>,
    /// The host's HMAC key, keyed once.
    pub pseudonymizer: Pseudonymizer,
    pub store: SqliteStore,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    /// The leases this request took, with the process that took them: a child forked during
    /// the request (pcntl_fork) must not release its parent's leases when it exits.
    static REQUEST_LEASES: RefCell<(u32, Vec<LeaseId>)> = const { RefCell::new((0, Vec::new())) };
}

/// The system temporary directory, as PHP's `sys_get_temp_dir()` falls back to it.
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}

/// Runs `f` with this process's worker, opening it first if needed: on first use, after a
/// fork, or when the configuration changed (an FPM pool's `php_admin_value`).
pub fn with<T>(
    config: &Arc<Config>,
    f: impl FnOnce(&mut Worker) -> Result<T, Error>,
) -> Result<T, Error> {
    WORKER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let stale = slot
            .as_ref()
            .is_none_or(|w| w.pid != std::process::id() || !Arc::ptr_eq(&w.config, config));
        if stale {
            if let Some(old) = slot.take() {
                if old.pid != std::process::id() {
                    // A connection inherited across fork must not be closed here: closing it
                    // could disturb the parent's locks. Leak it and open our own.
                    std::mem::forget(old);
                }
            }
            let (tmp, euid) = (temp_dir(), crate::trust::euid());
            if config.db_path.is_empty() {
                crate::trust::private_dir(&Config::default_dir(&tmp, euid))
                    .map_err(Error::Untrusted)?;
            }
            let db_path = config.db_path(&tmp, euid);
            let (key_path, create) = config.key_path(&tmp, euid);
            let key = keyfile::load(&key_path, create).map_err(Error::Key)?;
            let store = SqliteStore::open(&db_path, config.busy_timeout_ms, config.max_entries)
                .map_err(Error::Store)?;
            let pseudonymizer = Pseudonymizer::new(&key);
            *slot = Some(Worker {
                pid: std::process::id(),
                config: Arc::clone(config),
                pseudonymizer,
                store,
            });
        }
        f(slot.as_mut().expect("opened above"))
    })
}

/// Remembers a lease taken by this request, to be released at its end if the script forgets.
pub fn remember_lease(id: LeaseId) {
    REQUEST_LEASES.with(|l| {
        let mut l = l.borrow_mut();
        let pid = std::process::id();
        if l.0 != pid {
            *l = (pid, Vec::new());
        }
        l.1.push(id);
    });
}

/// Forgets a lease released explicitly.
pub fn forget_lease(id: &LeaseId) {
    REQUEST_LEASES.with(|l| l.borrow_mut().1.retain(|x| x != id));
}

/// Takes the leases this process took during this request and still holds.
pub fn take_request_leases() -> Vec<LeaseId> {
    REQUEST_LEASES.with(|l| {
        let (pid, leases) = std::mem::take(&mut *l.borrow_mut());
        if pid == std::process::id() {
            leases
        } else {
            Vec::new()
        }
    })
}

/// The database and key paths for phpinfo(), without opening anything.
pub fn paths(config: &Config) -> (PathBuf, PathBuf) {
    let (tmp, euid) = (temp_dir(), crate::trust::euid());
    (config.db_path(&tmp, euid), config.key_path(&tmp, euid).0)
}
