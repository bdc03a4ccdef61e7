//! What one PHP process, or one thread of a thread-safe (ZTS) PHP, keeps between calls: its
//! [`Limiter`] (the open store and the key), opened lazily on the first call (never in module
//! startup, which under FPM runs in the master before fork) and reopened when the process finds
//! itself forked.
//!
//! It lives in the module's globals, which PHP gives each thread (TSRM) and destroys with the
//! thread (GSHUTDOWN): there, and only there, the counts it holds back are written. Not in a
//! Rust `thread_local!`, whose destructor runs after PHP freed the thread, too late to call PHP
//! (the operations log writes through PHP's error log).

use crate::core::config::{Backend, Config, Fallback};
use crate::keyring::KeyRing;
use crate::limiter::{Limiter, Settings};
use crate::opslog::OpsLog;
use crate::php::error::Error;
use crate::storage::breaker::Breaker;
use crate::storage::denycache::DenyCache;
use crate::storage::fallback::{Fallback as FallbackStore, LocalStore};
use crate::storage::hostbreaker::HostBreaker;
use crate::storage::redis::{self, RedisSettings, RedisStore, Target};
use crate::storage::sqlite::SqliteStore;
use crate::storage::{system_clock, Clock, ErrorKind, Store, StoreError};
use ext_php_rs::zend::{ModuleGlobal, ModuleGlobals};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

struct Worker {
    /// The process that opened it (its fork generation, see [`process`]): a child forked during
    /// a request (pcntl_fork) gets its own, and never releases its parent's leases.
    process: u64,
    /// The configuration this worker was opened with.
    config: Arc<Config>,
    limiter: Limiter,
}

/// The module's globals: one per thread under ZTS, one per process otherwise.
#[derive(Default)]
pub struct Globals {
    worker: RefCell<Option<Worker>>,
}

impl ModuleGlobal for Globals {
    /// GSHUTDOWN: the thread (or, without ZTS, the process) is ending. Under ZTS PHP runs it on
    /// the ending thread (`ts_free_thread`), or at module shutdown on the main thread for
    /// every thread the server never freed (`ts_free_id`): a PHP thread either way, with the
    /// engine's own globals still alive (a module's are freed before those it depends on).
    fn gshutdown(&mut self) {
        let worker = self.worker.get_mut().take();
        // A panic must not unwind into PHP.
        let _ = catch_unwind(AssertUnwindSafe(|| shutdown(worker)));
    }
}

/// Registered with the module (`ModuleBuilder::globals`).
pub static GLOBALS: ModuleGlobals<Globals> = ModuleGlobals::new();

/// Runs `f` with this thread's worker slot; None while it is in use further up the stack
/// (a hook reached during a call), which a caller skips rather than panics on.
fn slot<T>(f: impl FnOnce(&mut Option<Worker>) -> T) -> Option<T> {
    let globals = GLOBALS.get();
    let mut slot = globals.worker.try_borrow_mut().ok()?;
    Some(f(&mut slot))
}

/// Bumped in every child at fork, so that a process can tell it was forked without asking the
/// kernel for its pid on every call (`getpid` is a system call).
static FORKS: AtomicU64 = AtomicU64::new(0);
static WATCH_FORKS: Once = Once::new();

extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// Which process this is, as far as a worker cares: changes in a forked child.
fn process() -> u64 {
    WATCH_FORKS.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic (async-signal-safe, as a
        // fork handler must be); called once, and the handler lives for the whole process.
        unsafe {
            libc::pthread_atfork(None, None, Some(forked));
        }
    });
    FORKS.load(Ordering::Relaxed)
}

/// The system temporary directory, as PHP's `sys_get_temp_dir()` falls back to it.
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}

/// Runs `f` with this process's worker, opening it first if needed: on first use, after a
/// fork, or when the configuration changed (an FPM pool's `php_admin_value`).
pub fn with<T>(
    config: &Arc<Config>,
    f: impl FnOnce(&mut Limiter) -> Result<T, Error>,
) -> Result<T, Error> {
    if let Some(why) = config.broken_error() {
        return Err(Error::Store(StoreError::new(ErrorKind::Misconfigured, why)));
    }
    slot(|slot| {
        let stale = slot
            .as_ref()
            .is_none_or(|w| w.process != process() || !Arc::ptr_eq(&w.config, config));
        if stale {
            if let Some(old) = slot.take() {
                if old.process != process() {
                    // A connection inherited across fork must not be closed here: closing it
                    // could disturb the parent's locks. Leak it and open our own.
                    std::mem::forget(old);
                }
            }
            let (tmp, euid) = (temp_dir(), crate::trust::euid());
            if config.sqlite.db_path.is_empty() {
                crate::trust::private_dir(&Config::default_dir(&tmp, euid))
                    .map_err(Error::Untrusted)?;
            }
            let db_path = config.db_path(&tmp, euid);
            if config.backend == Backend::Redis && config.key_file.is_empty() {
                // A default key made next to each host's database would give each host its own
                // pseudonyms: one limit silently split in as many.
                return Err(Error::Store(StoreError::new(
                    ErrorKind::Misconfigured,
                    "ratelimit.key_file must be set with ratelimit.backend=redis (every host must use the same key)",
                )));
            }
            let (key_path, create) = config.key_path(&tmp, euid);
            let previous = (!config.key_file_previous.is_empty())
                .then(|| PathBuf::from(&config.key_file_previous));
            let keys = KeyRing::load(&key_path, create, previous.as_deref())
                .and_then(|k| k.pinned(config.key_fingerprint))
                .map_err(Error::Key)?;
            let clock = system_clock();
            let log = OpsLog::new(super::ini::log_error, Arc::clone(&clock));
            let store = open_store(config, &db_path, clock, &log)?;
            let settings = Settings {
                fail_open: config.fail_open,
                lease_ttl_ms: config.lease_ttl_ms,
                ipv6_prefix: config.ipv6_prefix,
                dry_run: config.dry_run.clone(),
                request_ttl_ms: config.request_ttl_ms,
                request_replays: config.request_replays,
            };
            *slot = Some(Worker {
                process: process(),
                config: Arc::clone(config),
                limiter: Limiter::new(store, keys, settings, log),
            });
        }
        f(&mut slot.as_mut().expect("opened above").limiter)
    })
    .unwrap_or_else(|| Err(Error::Internal("ratelimit called from within itself".into())))
}

/// The store `config.backend` names, not connected yet (each connects on its first call).
fn open_store(
    config: &Config,
    db_path: &Path,
    clock: Clock,
    log: &Arc<OpsLog>,
) -> Result<Box<dyn Store>, Error> {
    Ok(match config.backend {
        // Repeated denials from the worker's deny cache: an attack costs no read of the file.
        Backend::Sqlite => Box::new(DenyCache::new(
            Box::new(SqliteStore::new(
                db_path,
                config.sqlite.busy_timeout_ms,
                config.sqlite.max_entries,
                clock,
                Arc::clone(log),
            )),
            monotonic_clock(),
        )),
        Backend::Redis => {
            let r = &config.redis;
            let settings = RedisSettings {
                target: Target::from_config(r).map_err(Error::Store)?,
                prefix: r.prefix.clone(),
                timeout_ms: r.timeout_ms,
                flush_ms: redis::FLUSH_MS,
            };
            let redis = RedisStore::new(settings, None, Arc::clone(&clock), Arc::clone(log));
            let redis = Box::new(if r.allow_eviction {
                redis.allowing_eviction()
            } else {
                redis
            });
            // The breaker's state is the host's: every worker reads it before asking Redis.
            let shared =
                HostBreaker::open(&HostBreaker::path_for(db_path)).map_err(Error::Store)?;
            // A probe whose worker died frees its slot after twice the timeout.
            let probe_ms = r.timeout_ms.saturating_mul(2).saturating_add(50);
            let breaker = Breaker::new(
                redis,
                shared,
                r.breaker,
                probe_ms,
                Arc::clone(&clock),
                Arc::clone(log),
            );
            // With a local fallback, its "deciding with the local fallback" is the one line of
            // a switch.
            let breaker = Box::new(match r.fallback {
                Fallback::None => breaker,
                Fallback::Local => breaker.opening_logged_above(),
            });
            let local: Option<LocalStore> = match r.fallback {
                Fallback::None => None,
                Fallback::Local => {
                    let (db, busy, max) = (
                        db_path.to_path_buf(),
                        config.sqlite.busy_timeout_ms,
                        config.sqlite.max_entries,
                    );
                    let (clock, log) = (Arc::clone(&clock), Arc::clone(log));
                    Some(Box::new(move || {
                        Ok(Box::new(SqliteStore::new(
                            &db,
                            busy,
                            max,
                            Arc::clone(&clock),
                            Arc::clone(&log),
                        )) as Box<dyn Store>)
                    }))
                }
            };
            let fallback = Box::new(
                FallbackStore::new(breaker, local, Arc::clone(log))
                    .pause_after_failure(monotonic_clock(), r.timeout_ms),
            );
            Box::new(DenyCache::new(fallback, monotonic_clock()))
        }
    })
}

/// Milliseconds since this process first asked: a clock that never steps back, for the deny
/// cache's deadlines.
fn monotonic_clock() -> Clock {
    let start = std::time::Instant::now();
    Arc::new(move || start.elapsed().as_millis().min(i64::MAX as u128) as i64)
}

/// At the end of a logical request (request shutdown, the SAPI's deactivate hook,
/// `ratelimit_end_request()`): releases the leases this worker took since the last end and
/// still holds; returns how many of them were live. Opens nothing: a thread or process that has
/// no limiter of its own (not yet, or only its parent's, inherited across fork) holds no lease.
pub fn end_request() -> u64 {
    slot(|slot| match slot.as_mut() {
        Some(w) if w.process == process() => w.limiter.end_request(),
        _ => 0,
    })
    .unwrap_or(0)
}

/// The thread or process is ending: releases what its last request still holds and writes
/// the counts its limiter holds back.
fn shutdown(worker: Option<Worker>) {
    if let Some(mut w) = worker {
        if w.process == process() {
            w.limiter.shutdown();
        } else {
            // Inherited across fork: the parent's, not ours to write or close.
            std::mem::forget(w);
        }
    }
}

/// The database and key paths for phpinfo(), without opening anything.
pub fn paths(config: &Config) -> (PathBuf, PathBuf) {
    let (tmp, euid) = (temp_dir(), crate::trust::euid());
    (config.db_path(&tmp, euid), config.key_path(&tmp, euid).0)
}
