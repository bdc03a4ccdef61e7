//! What one PHP process keeps between calls: the open store and the key, opened lazily on the
//! first call (never in module startup, which under FPM runs in the master before fork) and
//! reopened when the process finds itself forked; and the leases the current request holds.

use crate::core::config::Config;
use crate::core::lease::LeaseId;
use crate::keyfile;
use crate::php::error::Error;
use crate::storage::sqlite::SqliteStore;
use std::cell::RefCell;
use std::path::PathBuf;

pub struct Worker {
    pid: u32,
    pub db_path: PathBuf,
    pub key: Vec<u8>,
    pub store: SqliteStore,
    busy_timeout_ms: u64,
    max_entries: u64,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    static REQUEST_LEASES: RefCell<Vec<LeaseId>> = const { RefCell::new(Vec::new()) };
}

/// The system temporary directory, as PHP's `sys_get_temp_dir()` falls back to it.
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}

/// Runs `f` with this process's worker, opening it first if needed.
pub fn with<T>(config: &Config, f: impl FnOnce(&mut Worker) -> Result<T, Error>) -> Result<T, Error> {
    WORKER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let tmp = temp_dir();
        let db_path = config.db_path(&tmp);
        let stale = match slot.as_ref() {
            None => true,
            Some(w) => {
                w.pid != std::process::id()
                    || w.db_path != db_path
                    || w.busy_timeout_ms != config.busy_timeout_ms
                    || w.max_entries != config.max_entries
            }
        };
        if stale {
            if let Some(old) = slot.take() {
                if old.pid != std::process::id() {
                    // A connection inherited across fork must not be closed here: closing it
                    // could disturb the parent's locks. Leak it and open our own.
                    std::mem::forget(old);
                }
            }
            let (key_path, create) = config.key_path(&tmp);
            let key = keyfile::load(&key_path, create).map_err(Error::Key)?;
            let store = SqliteStore::open(&db_path, config.busy_timeout_ms, config.max_entries)
                .map_err(Error::Store)?;
            *slot = Some(Worker {
                pid: std::process::id(),
                db_path,
                key,
                store,
                busy_timeout_ms: config.busy_timeout_ms,
                max_entries: config.max_entries,
            });
        }
        f(slot.as_mut().expect("opened above"))
    })
}

/// Remembers a lease taken by this request, to be released at its end if the script forgets.
pub fn remember_lease(id: LeaseId) {
    REQUEST_LEASES.with(|l| l.borrow_mut().push(id));
}

/// Forgets a lease released explicitly.
pub fn forget_lease(id: &LeaseId) {
    REQUEST_LEASES.with(|l| l.borrow_mut().retain(|x| x != id));
}

/// Takes the leases this request still holds.
pub fn take_request_leases() -> Vec<LeaseId> {
    REQUEST_LEASES.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// The database and key paths for phpinfo(), without opening anything.
pub fn paths(config: &Config) -> (PathBuf, PathBuf) {
    let tmp = temp_dir();
    (config.db_path(&tmp), config.key_path(&tmp).0)
}
