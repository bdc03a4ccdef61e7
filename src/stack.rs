//! The composition root: which layers a configuration's store is made of, in which order, and
//! the [`Limiter`] over it. No PHP here (the glue asks for a `Limiter` and names no backend), so
//! that `cargo test` builds every stack exactly as it ships (tests/stacks.rs runs the
//! conformance suite on each).
//!
//! - `ratelimit.backend=sqlite`: deny cache -> SQLite.
//! - `ratelimit.backend=redis`: deny cache -> failover (the host's breaker, and with
//!   `ratelimit.redis_fallback=local` the host's SQLite file) -> Redis.

use crate::core::config::{Backend, Config, Fallback};
use crate::keyfile::KeyError;
use crate::keyring::KeyRing;
use crate::limiter::{Limiter, Settings};
use crate::opslog::OpsLog;
use crate::storage::denycache::{Denials, DenyCache};
use crate::storage::failover::{Failover, LocalStore};
use crate::storage::hostbreaker::HostBreaker;
use crate::storage::redis::{self, RedisSettings, RedisStore, Target};
use crate::storage::sqlite::SqliteStore;
use crate::storage::{Clock, ErrorKind, Store, StoreError};
use crate::trust::Untrusted;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a stack takes from its process besides the configuration: its clocks, and two things
/// a test changes (the conformance suite drives time by hand and reads counts from another
/// connection at once).
#[derive(Clone)]
pub struct Clocks {
    /// The wall clock in milliseconds, for stores that keep time themselves (SQLite) and for
    /// the host's breaker (shared by its processes).
    pub wall: Clock,
    /// Milliseconds that never step back, for this process's own deadlines (the deny cache's,
    /// the failover's pause).
    pub monotonic: Clock,
    /// The time Redis decides with: None for the server's own (as shipped).
    pub redis_time: Option<Clock>,
    /// How long Redis's counts may wait to be written (batched, as SQLite's are).
    pub redis_flush_ms: u64,
}

impl Clocks {
    /// The system's clocks, as shipped.
    pub fn system() -> Self {
        let start = std::time::Instant::now();
        Self {
            wall: crate::storage::system_clock(),
            monotonic: Arc::new(move || start.elapsed().as_millis().min(i64::MAX as u128) as i64),
            redis_time: None,
            redis_flush_ms: redis::FLUSH_MS,
        }
    }

    /// One clock a test moves, for everything, Redis included; counts written at each step.
    pub fn manual(clock: Clock) -> Self {
        Self {
            wall: Arc::clone(&clock),
            monotonic: Arc::clone(&clock),
            redis_time: Some(clock),
            redis_flush_ms: 0,
        }
    }
}

/// Where a process's files are when the configuration does not say: PHP's temporary directory
/// and the effective user (the default location is per user).
#[derive(Debug, Clone)]
pub struct Place {
    pub temp_dir: PathBuf,
    pub euid: u32,
}

impl Place {
    /// The database's path.
    pub fn db_path(&self, config: &Config) -> PathBuf {
        config.db_path(&self.temp_dir, self.euid)
    }

    /// The key file's path, and whether a missing one may be created there.
    pub fn key_path(&self, config: &Config) -> (PathBuf, bool) {
        config.key_path(&self.temp_dir, self.euid)
    }
}

/// Why no limiter could be opened: each is the operator's to fix.
#[derive(Debug)]
pub enum OpenError {
    Store(StoreError),
    Key(KeyError),
    /// The per-user directory of the default location is not ours (see [`crate::trust`]).
    Untrusted(Untrusted),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Store(e) => e.fmt(f),
            OpenError::Key(e) => e.fmt(f),
            OpenError::Untrusted(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {}

/// The limiter `config` describes: its key loaded, its store built (not connected yet: each
/// store connects on its first call).
pub fn limiter(
    config: &Config,
    place: &Place,
    clocks: &Clocks,
    log: &Arc<OpsLog>,
) -> Result<Limiter, OpenError> {
    if config.sqlite.db_path.is_empty() {
        crate::trust::private_dir(&Config::default_dir(&place.temp_dir, place.euid))
            .map_err(OpenError::Untrusted)?;
    }
    if config.backend == Backend::Redis && config.key_file.is_empty() {
        // A default key made next to each host's database would give each host its own
        // pseudonyms: one limit silently split in as many.
        return Err(OpenError::Store(StoreError::new(
            ErrorKind::Misconfigured,
            "ratelimit.key_file must be set with ratelimit.backend=redis (every host must use the same key)",
        )));
    }
    let (key_path, create) = place.key_path(config);
    let previous =
        (!config.key_file_previous.is_empty()).then(|| PathBuf::from(&config.key_file_previous));
    let db_path = place.db_path(config);
    let mut keys = KeyRing::load(&key_path, create, previous.as_deref())
        .and_then(|k| k.pinned(config.key_fingerprint))
        .map_err(OpenError::Key)?;
    if config.backend == Backend::Redis {
        // The key record lives in Redis: a respawned worker may find its master hung.
        keys = keys.noting_settled(crate::storage::statefile::beside(&db_path, ".key-settled"));
    }
    let store = store(config, &db_path, clocks, log).map_err(OpenError::Store)?;
    let settings = Settings {
        fail_open: config.fail_open,
        lease_ttl_ms: config.lease_ttl_ms,
        ipv6_prefix: config.ipv6_prefix,
        dry_run: config.dry_run.clone(),
        request_ttl_ms: config.request_ttl_ms,
        request_replays: config.request_replays,
    };
    Ok(Limiter::new(store, keys, settings, Arc::clone(log)))
}

/// The store `config.backend` names, with its layers, for the database at `db_path` (the
/// host's file: SQLite's store, the Redis backend's breaker and local fallback).
pub fn store(
    config: &Config,
    db_path: &Path,
    clocks: &Clocks,
    log: &Arc<OpsLog>,
) -> Result<Box<dyn Store>, StoreError> {
    // Repeated denials from the worker's deny cache: an attack costs no call to the store.
    Ok(match config.backend {
        Backend::Sqlite => Box::new(DenyCache::new(
            Box::new(sqlite(config, db_path, clocks, log)),
            Arc::clone(&clocks.monotonic),
            Denials::InBuckets,
        )),
        Backend::Redis => Box::new(DenyCache::new(
            Box::new(failover(config, db_path, clocks, log)?),
            Arc::clone(&clocks.monotonic),
            Denials::InTotals,
        )),
    })
}

fn sqlite(config: &Config, db_path: &Path, clocks: &Clocks, log: &Arc<OpsLog>) -> SqliteStore {
    SqliteStore::new(
        db_path,
        config.sqlite.busy_timeout_ms,
        config.sqlite.max_entries,
        Arc::clone(&clocks.wall),
        Arc::clone(log),
    )
}

/// Redis behind the host's breaker, and the host's SQLite file as the local fallback when
/// `ratelimit.redis_fallback=local`.
fn failover(
    config: &Config,
    db_path: &Path,
    clocks: &Clocks,
    log: &Arc<OpsLog>,
) -> Result<Failover, StoreError> {
    let r = &config.redis;
    let settings = RedisSettings {
        target: Target::from_config(r)?,
        prefix: r.prefix.clone(),
        timeout_ms: r.timeout_ms,
        flush_ms: clocks.redis_flush_ms,
    };
    let redis = RedisStore::new(
        settings,
        clocks.redis_time.clone(),
        Arc::clone(&clocks.wall),
        Arc::clone(log),
    );
    let redis = if r.allow_eviction {
        redis.allowing_eviction()
    } else {
        redis
    };
    let redis = if r.binary_values {
        redis.writing_binary_values()
    } else {
        redis
    };
    // The breakers' states are the host's (a file per server beside the database): every
    // worker reads its server's before asking Redis.
    let site = HostBreaker::path_for(db_path);
    // A probe whose worker died frees its slot after twice the timeout.
    let probe_ms = r.timeout_ms.saturating_mul(2).saturating_add(50);
    let mut f = Failover::new(Box::new(redis), Arc::clone(log))
        .breaker(&site, r.breaker, probe_ms, Arc::clone(&clocks.wall))?
        .pause_after_failure(Arc::clone(&clocks.monotonic), r.timeout_ms);
    if r.fallback == Fallback::Local {
        let (config, db, clocks, log) = (
            config.clone(),
            db_path.to_path_buf(),
            clocks.clone(),
            Arc::clone(log),
        );
        let open: LocalStore =
            Box::new(move || Ok(Box::new(sqlite(&config, &db, &clocks, &log)) as Box<dyn Store>));
        f = f.local(open);
    }
    Ok(f)
}

/// The rows phpinfo() shows about the stack, without opening anything.
pub fn info() -> Vec<(&'static str, String)> {
    vec![("SQLite version", rusqlite::version().to_string())]
}
