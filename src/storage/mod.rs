//! Where buckets and leases live. One small trait, so that a second backend (Redis, for sites
//! that outgrow one host) plugs in behind the same PHP API, and a breaker or a fallback can wrap
//! any store. Every method is one atomic step of the backend (one SQLite write transaction, one
//! Redis script) and uses [`crate::core`] for the arithmetic, so all backends decide alike.

pub mod breaker;
pub mod denycache;
pub mod fallback;
pub mod hostbreaker;
pub mod redis;
pub mod sigbus;
pub mod sqlite;
pub mod statefile;

use crate::core::bucket::Policy;
use crate::core::decision::{Ask, Verdict};
use crate::core::keyswitch::{Fingerprint, KeyRecord};
use crate::core::lease::{LeaseId, LeaseToken};
use crate::core::subject::BucketKey;
use std::fmt;
use std::sync::Arc;

pub use crate::core::breaker::BreakerState;
pub use crate::core::counters::{Counters, Stats};
pub use crate::core::top::BucketView;

/// The outcome of an acquire: the verdict, and the lease when a slot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub verdict: Verdict,
    pub lease: Option<LeaseToken>,
}

impl Acquired {
    /// A decision that could not be made (see [`Verdict::unavailable`]): never a lease.
    pub fn unavailable(fail_open: bool) -> Self {
        Self {
            verdict: Verdict::unavailable(fail_open),
            lease: None,
        }
    }
}

/// The outcome of a compound acquire ([`Store::acquire_all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquiredAll {
    /// The combined answer: that of limit `reported` (see `core::compound`).
    pub verdict: Verdict,
    /// Each limit's own view, in the order asked, for the headers.
    pub each: Vec<Verdict>,
    pub reported: usize,
    /// The slot taken in the first limit's bucket, if one was asked for and taken.
    pub lease: Option<LeaseToken>,
}

impl AcquiredAll {
    /// No decision could be made (`fail_open` as [`Verdict::unavailable`]): every limit says so.
    pub fn unavailable(n: usize, fail_open: bool) -> Self {
        let v = Verdict::unavailable(fail_open);
        Self {
            verdict: v,
            each: vec![v; n.max(1)],
            reported: 0,
            lease: None,
        }
    }
}

/// The wall clock in milliseconds, for stores that keep time themselves. A store reads it
/// inside its atomic step (for SQLite: once it holds the write lock), so that `now` is never
/// older than what the previous step wrote; a Redis store asks its server instead.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock as a [`Clock`]. Before 1970 counts as 0: a clock that steps back mints
/// nothing anyway.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis().min(i64::MAX as u128) as i64)
    })
}

/// A new lease's random name, drawn only for a call that asks for a slot (before the store's
/// atomic step, so that the step is no longer than it must be).
pub fn lease_id_for(ask: &Ask) -> Result<Option<LeaseId>, StoreError> {
    if ask.max_inflight == 0 {
        return Ok(None);
    }
    let mut id = [0u8; 16];
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut id).map_err(|e| {
        StoreError::new(ErrorKind::Io, "no random bytes for a lease").with_source(e)
    })?;
    Ok(Some(LeaseId(id)))
}

/// What went wrong, as a breaker or the limiter's policy needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Locked by another writer past the wait budget.
    Busy,
    /// No answer within the time allowed (the outcome of a write is then unknown).
    Timeout,
    /// The store cannot be reached (connection refused or lost).
    Unreachable,
    /// The file or the data is damaged.
    Corrupt,
    /// No space left.
    Full,
    /// Any other failure of the operating system or the backend.
    Io,
    /// Something an operator must fix first (a path that cannot be created, a bad address).
    Misconfigured,
}

impl ErrorKind {
    /// Whether waiting may cure it by itself. A transient fault is an "unavailable" decision;
    /// the others are errors.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ErrorKind::Busy | ErrorKind::Timeout | ErrorKind::Unreachable
        )
    }

    /// A fault of the storage itself (disk full, I/O error, read-only, damaged): met while
    /// deciding, it is an "unavailable" decision too, counted as a storage error; it ends when
    /// the fault does (space freed, file rebuilt), without a restart.
    pub fn is_storage_fault(self) -> bool {
        matches!(self, ErrorKind::Corrupt | ErrorKind::Full | ErrorKind::Io)
    }
}

/// A fault of the storage, which is never a decision by itself, and never an allow. The message
/// names the path or the address, never a subject; the backend's own error is the `source()`.
#[derive(Debug)]
pub struct StoreError {
    kind: ErrorKind,
    /// What failed, e.g. "cannot open database /var/lib/rl.sqlite".
    what: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    pub fn new(kind: ErrorKind, what: impl Into<String>) -> Self {
        Self {
            kind,
            what: what.into(),
            source: None,
        }
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn is_transient(&self) -> bool {
        self.kind.is_transient()
    }

    /// What failed, without the backend's error: for the operations log.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ratelimit: {}", self.what)?;
        match &self.source {
            Some(s) => write!(f, ": {s}"),
            None => Ok(()),
        }
    }
}

/// A file that is not ours (see [`crate::trust`]): for the operator to fix, never used.
impl From<crate::trust::Untrusted> for StoreError {
    fn from(u: crate::trust::Untrusted) -> Self {
        StoreError::new(
            ErrorKind::Misconfigured,
            format!("refusing {}: {}", u.path.display(), u.what),
        )
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// See [`Store::refill_epoch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefillEpoch {
    /// Not tracked: another process's reset is seen when the cached wait ends (Redis).
    Untracked,
    /// Tracked, but not known now (the shared file cannot be used): cache nothing.
    Unknown,
    /// Moves whenever a bucket got tokens back other than by refill.
    At(u64, u64),
}

/// Storage for buckets and leases, shared by every worker of a host (or of a site).
///
/// Each method is one atomic step that fixes `now` itself, inside the step. `unwritten` holds
/// counts the caller could not have written before (a step that failed): a successful step
/// adds them to the shared counters in the same atomic step, and a failed one writes nothing.
pub trait Store {
    /// Expire leases, refill, check, take (tokens and, if asked, a slot).
    ///
    /// With `ask.dry_run` the core's `decide` answers a denial `allowed` (`dry_run` set): the
    /// store counts it as `dry_run_denied` in the same step and gives it no lease. With
    /// `ask.request`, first in the same step: an admission remembered under that name for this
    /// bucket, whose lease is still live (or, without a lease, younger than its `ttl_ms`), is
    /// answered again (`retried` set, the same lease) taking nothing, counted as `retries`;
    /// otherwise the call is decided as usual and a real admission (`Verdict::took`) is
    /// remembered until its lease's expiry or `ttl_ms`, within the store's bound on entries.
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<Acquired, StoreError>;

    /// Compound limits, all or nothing: `asks[i]` in bucket `keys[i]` (1 to
    /// [`crate::core::compound::MAX_LIMITS`], all of one subject, so of one group), in one
    /// atomic step, decided by `core::compound::decide_all`: every bucket is refilled and
    /// checked before any is charged, and a denial by any charges none. Only the first ask may
    /// take a slot or carry a request id (a retry answers the remembered verdict, each limit as
    /// it stands now). The decision is counted once, in the reported limit's bucket.
    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<AcquiredAll, StoreError>;

    /// What a call of cost 1 would get now; writes nothing.
    fn peek(&mut self, key: &BucketKey, policy: &Policy) -> Result<Verdict, StoreError>;

    /// Frees the given leases, each in its own bucket; returns how many were live.
    fn release(&mut self, leases: &[LeaseToken], unwritten: &Counters) -> Result<u64, StoreError>;

    /// Forgets a bucket and its leases; true when there was something to forget. The bucket's
    /// counts stay in the totals: a reset forgets the limit, not the history.
    fn reset(&mut self, key: &BucketKey, unwritten: &Counters) -> Result<bool, StoreError>;

    /// The shared counters and gauges.
    fn stats(&mut self) -> Result<Stats, StoreError>;

    /// The pressure view: at most `n` buckets with at least one denial, most denials first
    /// (ordered as [`crate::core::top::order`] does), with this process's held-back counts.
    /// A read: it never blocks a decision.
    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError>;

    /// Which key the store's pseudonyms are made with (None for a fresh store).
    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError>;

    /// Records `new` as the store's key, in one atomic step, only if the key recorded now is
    /// still `expected` (None: no key recorded); true when it was recorded.
    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError>;

    /// Called at the end of each request: a store that batches counts writes them when they
    /// have waited long enough, so that a process killed later loses at most its last second.
    fn tick(&mut self) {}

    /// What a deny cache in front of this store must watch to stay exact (see
    /// [`denycache`]): a store whose buckets can get tokens back other than by refill (a
    /// reset, an eviction, a rebuilt file) from another process says when.
    fn refill_epoch(&mut self) -> RefillEpoch {
        RefillEpoch::Untracked
    }

    /// Writes what the store still holds back (counts it batches), with `unwritten`; called
    /// at process end. A store that writes everything at once has nothing to do.
    fn flush(&mut self, unwritten: &Counters) -> Result<(), StoreError> {
        let _ = unwritten;
        Ok(())
    }

    /// The state of the breaker in front of this store's primary, if there is one (see
    /// [`breaker::Breaker`]); wrappers pass it on.
    fn breaker(&mut self) -> Option<BreakerState> {
        None
    }

    /// How many times this process opened the host's breaker (closed to open) since it was
    /// last asked. Each opening is made by exactly one process of the host (under the breaker
    /// file's lock), so a caller counting these counts each opening once per host.
    fn take_openings(&mut self) -> u64 {
        0
    }

    /// Whether [`Store::add_denials`] is where a deny cache's denials are counted: the store's
    /// totals are the sums of its buckets' counts (SQLite), so they must not also be handed down
    /// as `unwritten`, or each would count twice.
    fn counts_denials_in_buckets(&self) -> bool {
        false
    }

    /// Adds denials of these buckets that were answered without the store (a deny cache's) to
    /// the buckets' own counts, for the pressure view. A store without per-bucket counts, or a
    /// bucket gone since, takes nothing.
    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        let _ = denials;
        Ok(())
    }

    /// Hands over the counts this store holds until its next successful step (a breaker's
    /// `redis_errors`): the caller, which can write them elsewhere (a fallback), takes them
    /// on, and the store forgets them.
    fn take_unwritten(&mut self) -> Counters {
        Counters::default()
    }
}

#[cfg(test)]
pub(crate) mod fake;
