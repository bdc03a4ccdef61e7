//! A tiny in-memory [`Store`] for the wrappers' tests: it decides with the core's `decide`
//! (token buckets by pseudonym, leases in a list, time from a clock the test drives), judges
//! request ids with the core's `request::judge`, counts its calls, writes what it is given in
//! `unwritten`, and fails with a given [`ErrorKind`] while told to.

use super::{
    Acquired, AcquiredAll, Batching, BucketView, Clock, Counters, ErrorKind, KeyRecords, Query,
    RefillEpoch, RefillWatch, Reply, Reports, Stats, Store, StoreError,
};
use crate::core::bucket::{Bucket, Policy};
use crate::core::decision::{self, Ask, Request};
use crate::core::keyswitch::{Fingerprint, KeyRecord};
use crate::core::lease::{LeaseId, LeaseToken, Slots};
use crate::core::request::{self, Judgement, Record};
use crate::core::subject::{BucketKey, Pseudonym};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct State {
    /// While set, every call fails with it.
    pub fail: Option<ErrorKind>,
    /// Calls made (failed ones too).
    pub calls: u64,
    pub written: Counters,
    pub buckets: HashMap<Pseudonym, Bucket>,
    /// Live leases: (id, bucket, expiry).
    pub leases: Vec<(LeaseId, Pseudonym, i64)>,
    next_lease: u8,
    pub key: Option<KeyRecord>,
    /// What `refill_epoch` answers (None: `Untracked`).
    pub epoch: Option<RefillEpoch>,
    /// Admissions remembered for their request id, with the lease each took.
    pub requests: HashMap<Pseudonym, (Record, Option<LeaseId>)>,
    /// The server each bucket lives on, for a breaker per node (none named: one server).
    pub nodes: HashMap<Pseudonym, String>,
    /// Buckets whose calls fail while `fail` is unset (a sick node), with this kind.
    pub failing: HashMap<Pseudonym, ErrorKind>,
}

impl State {
    /// Drops the expired leases, then counts `bucket`'s live ones.
    fn live_slots(&mut self, bucket: &Pseudonym, now: i64) -> Slots {
        self.leases.retain(|l| l.2 > now);
        let live: Vec<i64> = self
            .leases
            .iter()
            .filter(|l| l.1 == *bucket)
            .map(|l| l.2)
            .collect();
        Slots {
            live: live.len() as u64,
            earliest_expiry: live.iter().min().copied(),
        }
    }
}

impl State {
    /// The rule of `core::request` for a call with `r` in `bucket`; a replay takes one from
    /// the record's replays left (the last one forgets it).
    fn judge(&mut self, bucket: &Pseudonym, r: &Request, now: i64) -> Judgement {
        let found = self.requests.get(&r.name).copied();
        let live = found.and_then(|(_, lease)| lease).and_then(|id| {
            self.leases
                .iter()
                .find(|l| l.0 == id && l.2 > now)
                .map(|l| l.2)
        });
        let j = request::judge(found.as_ref().map(|f| &f.0), bucket, &r.terms, now, live);
        if j == Judgement::Replay {
            if let Some((rec, _)) = self.requests.get_mut(&r.name) {
                rec.replays_left -= 1;
                if rec.replays_left == 0 {
                    self.requests.remove(&r.name);
                }
            }
            self.written.retries += 1;
        }
        j
    }

    /// Remembers an admission made with `r`.
    fn remember(
        &mut self,
        bucket: &Pseudonym,
        r: &Request,
        lease: Option<LeaseId>,
        (now, lease_ttl_ms): (i64, u64),
    ) {
        if !request::worth_remembering(r.replays, lease.is_some()) {
            return;
        }
        let record = Record {
            bucket: *bucket,
            terms: r.terms,
            replays_left: r.replays,
            expires: request::expiry(now, r.ttl_ms, lease.map(|_| lease_ttl_ms)),
        };
        self.requests.insert(r.name, (record, lease));
    }
}

/// The store, and a handle the test keeps on its state.
#[derive(Clone)]
pub struct Fake(pub Rc<RefCell<State>>, Clock);

impl Fake {
    pub fn new(clock: Clock) -> Self {
        Fake(Rc::default(), clock)
    }

    pub fn boxed(&self) -> Box<dyn Store> {
        Box::new(self.clone())
    }

    pub fn fail(&self, kind: Option<ErrorKind>) {
        self.0.borrow_mut().fail = kind;
    }

    pub fn calls(&self) -> u64 {
        self.0.borrow().calls
    }

    pub fn written(&self) -> Counters {
        self.0.borrow().written
    }

    /// One call: fails while told to, else writes the carried counts (and clears them).
    fn step(&self, carry: &mut Counters) -> Result<(), StoreError> {
        let mut s = self.0.borrow_mut();
        s.calls += 1;
        if let Some(kind) = s.fail {
            return Err(StoreError::new(kind, "fake store failing"));
        }
        s.written.add(&std::mem::take(carry));
        Ok(())
    }

    /// A call that writes nothing.
    fn read(&self) -> Result<(), StoreError> {
        self.step(&mut Counters::default())
    }

    /// A call about `bucket`: fails too while its node is sick (see [`State::failing`]).
    fn step_on(&self, bucket: &Pseudonym, carry: &mut Counters) -> Result<(), StoreError> {
        let sick = self.0.borrow().failing.get(bucket).copied();
        if let Some(kind) = sick {
            self.0.borrow_mut().calls += 1;
            return Err(StoreError::new(kind, "fake node failing"));
        }
        self.step(carry)
    }
}

/// A clock the test moves.
pub struct Manual(pub Arc<AtomicI64>);

impl Manual {
    pub fn at(t: i64) -> Self {
        Manual(Arc::new(AtomicI64::new(t)))
    }
    pub fn set(&self, t: i64) {
        self.0.store(t, Ordering::SeqCst);
    }
    pub fn clock(&self) -> Clock {
        let t = Arc::clone(&self.0);
        Arc::new(move || t.load(Ordering::SeqCst))
    }
}

/// How a [`Serving`] answers a query: the inner store is there to ask, or not.
pub type ServeWith =
    Box<dyn for<'a> FnMut(Query<'a>, &mut dyn Store, &mut Counters) -> Result<Reply, StoreError>>;

/// A store in front of another that answers its queries (`serve`) as a test says, and passes
/// every other call through: what the tests of a wrapper watch or answer of its store.
pub struct Serving(pub Box<dyn Store>, pub ServeWith);

impl Store for Serving {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        self.0.acquire(key, ask, lease_ttl_ms, carry)
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        self.0.acquire_all(keys, asks, lease_ttl_ms, carry)
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<decision::Verdict, StoreError> {
        self.0.peek(key, policy, carry)
    }

    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        self.0.release(leases, carry)
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        self.0.reset(key, carry)
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        (self.1)(q, self.0.as_mut(), carry)
    }
}

pub fn key(n: u8) -> BucketKey {
    BucketKey {
        bucket: [n; 16],
        group: [n; 16],
        previous: None,
    }
}

impl Store for Fake {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        self.step_on(&key.bucket, carry)?;
        let now = (self.1)();
        let mut s = self.0.borrow_mut();
        let slots = s.live_slots(&key.bucket, now);
        let stored = s.buckets.get(&key.bucket).copied();
        if let Some(r) = &ask.request {
            let verdict = match s.judge(&key.bucket, r, now) {
                Judgement::Fresh => None,
                Judgement::Replay => Some(decision::replay(stored, &ask.policy, now)),
                Judgement::InProgress { until } => {
                    let v = decision::in_progress(stored, &ask.policy, until, now, ask.dry_run);
                    let mut c = Counters::default();
                    c.record_verdict(&v);
                    s.written.add(&c);
                    Some(v)
                }
            };
            if let Some(verdict) = verdict {
                return Ok(Acquired {
                    verdict,
                    lease: None,
                });
            }
        }
        let d = decision::decide(stored, ask, slots, now);
        s.buckets.insert(key.bucket, d.bucket);
        let mut c = Counters::default();
        c.record_verdict(&d.verdict);
        s.written.add(&c);
        let lease = (d.verdict.took() && ask.max_inflight > 0).then(|| {
            s.next_lease += 1;
            let id = LeaseId([s.next_lease; 16]);
            s.leases.push((id, key.bucket, now + lease_ttl_ms as i64));
            LeaseToken { id, key: *key }
        });
        if let Some(r) = ask.request.as_ref().filter(|_| d.verdict.took()) {
            s.remember(&key.bucket, r, lease.map(|l| l.id), (now, lease_ttl_ms));
        }
        Ok(Acquired {
            verdict: d.verdict,
            lease,
        })
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        self.step_on(&keys[0].bucket, carry)?;
        let now = (self.1)();
        let mut s = self.0.borrow_mut();
        let slots = s.live_slots(&keys[0].bucket, now);
        let stored: Vec<_> = keys
            .iter()
            .map(|k| s.buckets.get(&k.bucket).copied())
            .collect();
        if let Some(r) = &asks[0].request {
            let j = s.judge(&keys[0].bucket, r, now);
            let each: Vec<_> = stored
                .iter()
                .zip(asks)
                .map(|(b, a)| decision::peek(*b, &a.policy, now))
                .collect();
            if let Some((reported, verdict)) =
                crate::core::compound::remembered(&each, j, now, asks[0].dry_run)
            {
                if !verdict.replay {
                    let mut c = Counters::default();
                    c.record_verdict(&verdict);
                    s.written.add(&c);
                }
                return Ok(AcquiredAll {
                    verdict,
                    each,
                    reported,
                    lease: None,
                });
            }
        }
        let d = crate::core::compound::decide_all(&stored, asks, slots, now);
        for (k, b) in keys.iter().zip(&d.buckets) {
            s.buckets.insert(k.bucket, *b);
        }
        let mut c = Counters::default();
        c.record_verdict(&d.verdict);
        s.written.add(&c);
        let lease = (d.verdict.took() && asks[0].max_inflight > 0).then(|| {
            s.next_lease += 1;
            let id = LeaseId([s.next_lease; 16]);
            s.leases
                .push((id, keys[0].bucket, now + lease_ttl_ms as i64));
            LeaseToken { id, key: keys[0] }
        });
        if let Some(r) = asks[0].request.as_ref().filter(|_| d.verdict.took()) {
            s.remember(&keys[0].bucket, r, lease.map(|l| l.id), (now, lease_ttl_ms));
        }
        Ok(AcquiredAll {
            verdict: d.verdict,
            each: d.each,
            reported: d.reported,
            lease,
        })
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        _: &mut Counters,
    ) -> Result<decision::Verdict, StoreError> {
        self.read()?;
        let now = (self.1)();
        Ok(decision::peek(
            self.0.borrow().buckets.get(&key.bucket).copied(),
            policy,
            now,
        ))
    }

    /// As Redis frees them: one call per lease, to its bucket's server, in order; a sick one
    /// fails the release after the earlier leases were freed, writing no count.
    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        let fail = self.0.borrow().fail;
        if let Some(kind) = fail {
            self.0.borrow_mut().calls += 1;
            return Err(StoreError::new(kind, "fake store failing"));
        }
        let mut freed = 0;
        for t in leases {
            let sick = self.0.borrow().failing.get(&t.key.bucket).copied();
            if let Some(kind) = sick {
                self.0.borrow_mut().calls += 1;
                return Err(StoreError::new(kind, "fake node failing"));
            }
            let mut s = self.0.borrow_mut();
            let before = s.leases.len();
            s.leases.retain(|l| l.0 != t.id);
            freed += (before - s.leases.len()) as u64;
        }
        self.step(carry)?;
        Ok(freed)
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        self.step(carry)?;
        let mut s = self.0.borrow_mut();
        s.leases.retain(|l| l.1 != key.bucket);
        Ok(s.buckets.remove(&key.bucket).is_some())
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        super::answer(self, q, carry)
    }
}

impl Reports for Fake {
    fn stats(&mut self) -> Result<Stats, StoreError> {
        self.read()?;
        let s = self.0.borrow();
        Ok(Stats {
            counters: s.written,
            entries: s.buckets.len() as u64,
            live_leases: s.leases.len() as u64,
            breaker: None,
            partial: false,
        })
    }

    fn top(&mut self, _: usize) -> Result<Vec<BucketView>, StoreError> {
        self.read()?;
        Ok(Vec::new())
    }
}

/// The node a test named for the bucket (see [`State::nodes`]).
impl super::Nodes for Fake {
    fn node_of(&mut self, key: &BucketKey) -> Option<String> {
        self.0.borrow().nodes.get(&key.bucket).cloned()
    }
}

impl super::Refunds for Fake {
    fn refund(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        cost: u64,
        carry: &mut Counters,
    ) -> Result<bool, StoreError> {
        self.step_on(&key.bucket, carry)?;
        let now = (self.1)();
        let mut s = self.0.borrow_mut();
        let stored = s.buckets.get(&key.bucket).copied();
        let milli = cost.saturating_mul(crate::core::bucket::MILLI);
        match crate::core::bucket::refund(stored, policy, milli, now) {
            Some(r) if r.given > 0 => {
                s.buckets.insert(key.bucket, r.bucket);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl RefillWatch for Fake {
    fn refill_epoch(&mut self) -> RefillEpoch {
        self.0.borrow().epoch.unwrap_or(RefillEpoch::Untracked)
    }
}

impl KeyRecords for Fake {
    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        self.read()?;
        Ok(self.0.borrow().key.clone())
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        self.read()?;
        let mut s = self.0.borrow_mut();
        if s.key.as_ref().map(|k| &k.fingerprint) != expected {
            return Ok(false);
        }
        let mut rec = new.clone();
        if rec.since_ms == crate::core::keyswitch::STAMP_NOW {
            rec.since_ms = (self.1)();
        }
        s.key = Some(rec);
        Ok(true)
    }
}

impl Batching for Fake {
    fn add_denials(&mut self, _: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        Ok(())
    }

    fn tick(&mut self) {}

    fn flush(&mut self, carry: &mut Counters) -> Result<(), StoreError> {
        self.step(carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::bucket::Policy;
    use crate::core::decision::Reason;
    use crate::core::request::Terms;

    fn with_id(inflight: u64, replays: u32) -> Ask {
        let mut a = Ask::new(Policy::new(5, 3_600_000).unwrap(), 1, inflight);
        a.request = Some(Request {
            name: [9; 16],
            ttl_ms: 60_000,
            terms: Terms([1; 16]),
            replays,
        });
        a
    }

    /// The fake applies core::request's rule as the real stores do (the conformance suite
    /// runs them): in progress while the lease lives, then replays, then charged.
    #[test]
    fn the_fake_judges_request_ids_as_the_stores_do() {
        let clock = Manual::at(0);
        let mut f = Fake::new(clock.clock());
        let a = with_id(1, 1);
        let first = f
            .acquire(&key(1), &a, 10_000, &mut Counters::default())
            .unwrap();
        assert!(first.verdict.took() && first.lease.is_some());
        let again = f
            .acquire(&key(1), &a, 10_000, &mut Counters::default())
            .unwrap();
        assert_eq!(
            (
                again.verdict.reason,
                again.verdict.retry_after_ms,
                again.lease
            ),
            (Reason::InProgress, 10_000, None)
        );
        clock.set(10_000);
        let replay = f
            .acquire(&key(1), &a, 10_000, &mut Counters::default())
            .unwrap();
        assert!(replay.verdict.replay && replay.lease.is_none());
        let charged = f
            .acquire(&key(1), &a, 10_000, &mut Counters::default())
            .unwrap();
        assert!(charged.verdict.took() && charged.verdict.remaining == 3);
        let w = f.written();
        assert_eq!((w.allowed, w.retries, w.denied_in_progress), (2, 1, 1));
    }
}
