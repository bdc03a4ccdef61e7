//! Where buckets and leases live. One trait, so that a second backend (Redis, for sites that
//! outgrow one host) plugs in behind the same PHP API. Every method is one atomic step of the
//! backend (one SQLite write transaction, one Redis script) and uses [`crate::core`] for the
//! arithmetic, so all backends decide alike.

pub mod sqlite;

use crate::core::decision::{Ask, Verdict};
use crate::core::lease::LeaseId;
use crate::core::subject::Pseudonym;
use std::fmt;
use std::path::PathBuf;

/// The outcome of an acquire: the verdict, and the lease when a slot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub verdict: Verdict,
    pub lease: Option<LeaseId>,
}

/// Host-wide counters, summed over all workers, and two gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub allowed: u64,
    pub denied_rate: u64,
    pub denied_inflight: u64,
    pub unavailable: u64,
    pub leases_expired: u64,
    pub evicted: u64,
    pub clock_regressions: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.allowed += o.allowed;
        self.denied_rate += o.denied_rate;
        self.denied_inflight += o.denied_inflight;
        self.unavailable += o.unavailable;
        self.leases_expired += o.leases_expired;
        self.evicted += o.evicted;
        self.clock_regressions += o.clock_regressions;
    }

    /// Named pairs, in the order `ratelimit_stats()` lists them.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        [
            ("allowed", self.allowed),
            ("denied_rate", self.denied_rate),
            ("denied_inflight", self.denied_inflight),
            ("unavailable", self.unavailable),
            ("leases_expired", self.leases_expired),
            ("evicted", self.evicted),
            ("clock_regressions", self.clock_regressions),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub counters: Counters,
    /// Buckets stored.
    pub entries: u64,
    /// Leases not yet expired nor released.
    pub live_leases: u64,
}

/// A fault of the storage that is not a decision. `Busy` alone becomes a decision
/// ("unavailable"); the others become a `RateLimit\Exception`. None ever becomes an allow.
#[derive(Debug)]
pub enum StoreError {
    /// Still locked by another writer after the busy timeout.
    Busy,
    /// The database could not be opened or created.
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The file is not a database, or is damaged.
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// Any other SQLite failure (disk full, read-only file, I/O error).
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The operating system gave no random bytes for a lease name.
    Random(String),
    /// The database, a file next to it or its directory is not ours (see [`crate::trust`]).
    Untrusted(crate::trust::Untrusted),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Busy => write!(f, "ratelimit: the database is busy"),
            StoreError::Open { path, source } => {
                write!(
                    f,
                    "ratelimit: cannot open database {}: {source}",
                    path.display()
                )
            }
            StoreError::Corrupt { path, source } => {
                write!(
                    f,
                    "ratelimit: database {} is corrupt or not a database: {source}",
                    path.display()
                )
            }
            StoreError::Sqlite { path, source } => {
                write!(f, "ratelimit: database {}: {source}", path.display())
            }
            StoreError::Random(e) => write!(f, "ratelimit: no random bytes for a lease: {e}"),
            StoreError::Untrusted(u) => u.fmt(f),
        }
    }
}

impl std::error::Error for StoreError {}

/// The wall clock in milliseconds. Stores read it once they hold their lock: a time read before
/// waiting for the lock would be older than what the previous holder wrote, which looks like a
/// clock running backwards (harmless, since it mints nothing, but it would be miscounted).
pub type Clock<'a> = &'a dyn Fn() -> i64;

/// Storage for buckets and leases, shared by every worker of a host (or of a site).
pub trait Store {
    /// Expire leases, refill, check, take (tokens and, if asked, a slot), in one atomic step.
    /// A `Busy` error is counted as `unavailable` by the store itself (written later).
    fn acquire(
        &mut self,
        key: &Pseudonym,
        ask: &Ask,
        lease_ttl_ms: u64,
        clock: Clock<'_>,
    ) -> Result<Acquired, StoreError>;

    /// What a call of cost 1 would get now; writes nothing.
    fn peek(
        &mut self,
        key: &Pseudonym,
        policy: &crate::core::bucket::Policy,
        clock: Clock<'_>,
    ) -> Result<Verdict, StoreError>;

    /// Frees the given leases; returns how many were live.
    fn release(&mut self, leases: &[LeaseId], clock: Clock<'_>) -> Result<u64, StoreError>;

    /// Forgets a bucket and its leases; true when there was something to forget.
    fn reset(&mut self, key: &Pseudonym) -> Result<bool, StoreError>;

    /// Host-wide counters and gauges, this worker's unwritten counts included.
    fn stats(&mut self, clock: Clock<'_>) -> Result<Stats, StoreError>;
}
