//! Where buckets and leases live. One small trait, so that a second backend (Redis, for sites
//! that outgrow one host) plugs in behind the same PHP API, and a breaker or a fallback can wrap
//! any store. Every method is one atomic step of the backend (one SQLite write transaction, one
//! Redis script) and uses [`crate::core`] for the arithmetic, so all backends decide alike.

pub mod denycache;
pub mod failover;
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

    /// How a fault met while deciding is answered, for every layer: an "unavailable" decision
    /// (or the local fallback's) for a transient or storage fault, the call's error for what an
    /// operator must fix.
    pub fn answer(self) -> Answer {
        if self.is_transient() || self.is_storage_fault() {
            Answer::Unavailable
        } else {
            Answer::Error
        }
    }

    /// Whether a failed call to a primary behind a breaker counts toward opening it: only no
    /// answer in time and no connection. A server that answered, even with an error (our
    /// settings refused, a damaged value, out of memory), is up: its errors cost no wait, and a
    /// breaker opened by them would hide what an operator must see on every call.
    pub fn is_outage(self) -> bool {
        matches!(self, ErrorKind::Timeout | ErrorKind::Unreachable)
    }
}

/// See [`ErrorKind::answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// No decision could be made: "unavailable" (admitted only with `fail_open`), or decided by
    /// the local fallback where there is one.
    Unavailable,
    /// The call fails with the error.
    Error,
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

/// See [`RefillWatch::refill_epoch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefillEpoch {
    /// Not tracked: another process's reset is seen when the cached wait ends (Redis).
    Untracked,
    /// Tracked, but not known now (the shared file cannot be used): cache nothing.
    Unknown,
    /// Moves whenever a bucket got tokens back other than by refill.
    At(u64, u64),
}

/// The five decisions, each one atomic step of the backend that fixes `now` itself, inside the
/// step; and [`Store::serve`] for the rest, so that a layer (a deny cache, the failover) forwards
/// everything it does not change in one place.
///
/// `carry` holds counts not written yet (this process's, and those a layer adds, such as a failed
/// call to Redis): a step that succeeds writes them (or takes them on for its next write) and
/// clears them; a failed step leaves them for the next one. One value, owned by the limiter,
/// travels down the layers; no layer holds counts of its own.
pub trait Store {
    /// Expire leases, refill, check, take (tokens and, if asked, a slot).
    ///
    /// With `ask.dry_run` the core's `decide` answers a denial `allowed` (`dry_run` set): the
    /// store counts it as `dry_run_denied` in the same step and gives it no lease. With
    /// `ask.request`, first in the same step: the store judges a retry of an admission remembered
    /// under that name with `core::request` (in progress while its lease lives, then replayed
    /// taking nothing, within the replay budget); a real admission (`Verdict::took`) is
    /// remembered until its lease's expiry or `ttl_ms`, within the store's bound on entries.
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
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
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError>;

    /// What a call of cost 1 would get now; writes nothing (`carry` is only added to by a
    /// layer whose own call failed).
    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<Verdict, StoreError>;

    /// Frees the given leases, each in its own bucket; returns how many were live.
    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError>;

    /// Forgets a bucket and its leases; true when there was something to forget. The bucket's
    /// counts stay in the totals: a reset forgets the limit, not the history.
    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError>;

    /// Everything that is not a decision: see [`Query`]. A backend answers it with
    /// [`answer`] from its capability traits; the typed calls are the methods of `dyn Store`.
    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError>;
}

/// A boxed store (a stack, as [`crate::stack`] builds it) is a store.
impl<S: Store + ?Sized> Store for Box<S> {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        (**self).acquire(key, ask, lease_ttl_ms, carry)
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        (**self).acquire_all(keys, asks, lease_ttl_ms, carry)
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<Verdict, StoreError> {
        (**self).peek(key, policy, carry)
    }

    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        (**self).release(leases, carry)
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        (**self).reset(key, carry)
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        (**self).serve(q, carry)
    }
}

/// What a store is asked besides decisions.
#[derive(Debug, Clone, Copy)]
pub enum Query<'a> {
    /// [`Reports::stats`].
    Stats,
    /// [`Reports::top`].
    Top(usize),
    /// [`KeyRecords::key_record`].
    KeyRecord,
    /// [`KeyRecords::record_key`].
    RecordKey(&'a KeyRecord, Option<&'a Fingerprint>),
    /// [`Batching::add_denials`].
    AddDenials(&'a [(BucketKey, u64)]),
    /// [`Batching::tick`].
    Tick,
    /// [`Batching::flush`].
    Flush,
    /// [`RefillWatch::refill_epoch`].
    RefillEpoch,
    /// [`Nodes::node_of`].
    Node(&'a BucketKey),
    /// [`Refunds::refund`]: `cost` tokens back to the bucket under `policy`.
    Refund(&'a BucketKey, &'a Policy, u64),
}

/// A store's answer to a [`Query`], the variant of the query's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Stats(Stats),
    Top(Vec<BucketView>),
    KeyRecord(Option<KeyRecord>),
    Recorded(bool),
    Epoch(RefillEpoch),
    Node(Option<String>),
    Refunded(bool),
    Done,
}

/// The counters, gauges and pressure view of `ratelimit_stats()` and `ratelimit_top()`.
pub trait Reports {
    /// The shared counters and gauges.
    fn stats(&mut self) -> Result<Stats, StoreError>;

    /// At most `n` buckets with at least one denial, most denials first (ordered as
    /// [`crate::core::top::order`] does), with this process's held-back counts. A read: it
    /// never blocks a decision.
    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError>;
}

/// Which key the store's pseudonyms are made with (see `core::keyswitch`).
pub trait KeyRecords {
    /// The key on record; None for a fresh store.
    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError>;

    /// Records `new` as the store's key, in one atomic step, only if the key recorded now is
    /// still `expected` (None: no key recorded); true when it was recorded.
    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError>;
}

/// Counts a store writes later than the step that made them.
pub trait Batching {
    /// Adds denials of these buckets answered without the store (a deny cache's) to the
    /// buckets' own counts, for the pressure view. A bucket gone since takes nothing.
    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError>;

    /// Called at the end of each request: writes what waited long enough, so that a process
    /// killed later loses at most its last second. Best effort.
    fn tick(&mut self);

    /// Writes everything still held back, with `carry` (cleared when taken); at process end.
    fn flush(&mut self, carry: &mut Counters) -> Result<(), StoreError>;
}

/// What a deny cache in front of a store must watch to stay exact (see [`denycache`]): a store
/// whose buckets can get tokens back other than by refill (a reset, an eviction, a rebuilt file)
/// from another process says when.
pub trait RefillWatch {
    fn refill_epoch(&mut self) -> RefillEpoch;
}

/// Tokens given back (`ratelimit_refund()`): one atomic step of the store, computed by
/// `core::bucket::refund` (see there: never past the capacity, a missing bucket left missing,
/// an ended window left alone). Not a decision: nothing is counted but the carried counts,
/// written as by any step. A store whose deny caches watch an epoch ([`RefillWatch`]) moves
/// it when tokens came back.
pub trait Refunds {
    /// True when tokens were given back.
    fn refund(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        cost: u64,
        carry: &mut Counters,
    ) -> Result<bool, StoreError>;
}

/// Which server a bucket's calls go to, for a breaker per server: a sick Redis master makes
/// only its own subjects unavailable.
pub trait Nodes {
    /// The server's address as the store knows it now, without asking the network; None for a
    /// store of one server (or one that does not know yet).
    fn node_of(&mut self, key: &BucketKey) -> Option<String>;
}

/// [`Store::serve`] of a backend, from its capability traits.
pub fn answer<S>(s: &mut S, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError>
where
    S: Reports + KeyRecords + Batching + RefillWatch + Nodes + Refunds,
{
    Ok(match q {
        Query::Stats => Reply::Stats(s.stats()?),
        Query::Top(n) => Reply::Top(s.top(n)?),
        Query::KeyRecord => Reply::KeyRecord(s.key_record()?),
        Query::RecordKey(new, expected) => Reply::Recorded(s.record_key(new, expected)?),
        Query::AddDenials(d) => {
            s.add_denials(d)?;
            Reply::Done
        }
        Query::Tick => {
            s.tick();
            Reply::Done
        }
        Query::Flush => {
            s.flush(carry)?;
            Reply::Done
        }
        Query::RefillEpoch => Reply::Epoch(s.refill_epoch()),
        Query::Node(key) => Reply::Node(s.node_of(key)),
        Query::Refund(key, policy, cost) => Reply::Refunded(s.refund(key, policy, cost, carry)?),
    })
}

/// A step's result, for a backend: when it succeeded, the carried counts were written (or taken
/// on for the store's next write), so the caller no longer holds them.
pub fn taken<T>(carry: &mut Counters, r: Result<T, StoreError>) -> Result<T, StoreError> {
    if r.is_ok() {
        *carry = Counters::default();
    }
    r
}

/// A reply of another kind than the query's: a bug of a layer, never a decision.
fn mismatch(asked: &str, got: &Reply) -> StoreError {
    StoreError::new(
        ErrorKind::Io,
        format!("a store answered {asked} with {got:?}"),
    )
}

/// The typed calls of [`Store::serve`], for every store and layer.
pub trait StoreExt: Store {
    fn stats(&mut self, carry: &mut Counters) -> Result<Stats, StoreError> {
        match self.serve(Query::Stats, carry)? {
            Reply::Stats(s) => Ok(s),
            r => Err(mismatch("stats", &r)),
        }
    }

    fn top(&mut self, n: usize, carry: &mut Counters) -> Result<Vec<BucketView>, StoreError> {
        match self.serve(Query::Top(n), carry)? {
            Reply::Top(v) => Ok(v),
            r => Err(mismatch("top", &r)),
        }
    }

    fn key_record(&mut self, carry: &mut Counters) -> Result<Option<KeyRecord>, StoreError> {
        match self.serve(Query::KeyRecord, carry)? {
            Reply::KeyRecord(k) => Ok(k),
            r => Err(mismatch("key_record", &r)),
        }
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
        carry: &mut Counters,
    ) -> Result<bool, StoreError> {
        match self.serve(Query::RecordKey(new, expected), carry)? {
            Reply::Recorded(b) => Ok(b),
            r => Err(mismatch("record_key", &r)),
        }
    }

    fn add_denials(
        &mut self,
        denials: &[(BucketKey, u64)],
        carry: &mut Counters,
    ) -> Result<(), StoreError> {
        self.serve(Query::AddDenials(denials), carry).map(drop)
    }

    fn tick(&mut self, carry: &mut Counters) {
        let _ = self.serve(Query::Tick, carry);
    }

    fn flush(&mut self, carry: &mut Counters) -> Result<(), StoreError> {
        self.serve(Query::Flush, carry).map(drop)
    }

    fn refill_epoch(&mut self, carry: &mut Counters) -> RefillEpoch {
        match self.serve(Query::RefillEpoch, carry) {
            Ok(Reply::Epoch(e)) => e,
            _ => RefillEpoch::Unknown,
        }
    }

    fn refund(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        cost: u64,
        carry: &mut Counters,
    ) -> Result<bool, StoreError> {
        match self.serve(Query::Refund(key, policy, cost), carry)? {
            Reply::Refunded(b) => Ok(b),
            r => Err(mismatch("refund", &r)),
        }
    }

    fn node_of(&mut self, key: &BucketKey, carry: &mut Counters) -> Option<String> {
        match self.serve(Query::Node(key), carry) {
            Ok(Reply::Node(n)) => n,
            _ => None,
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

#[cfg(test)]
pub(crate) mod fake;
