//! The limiter: what every backend shares between a PHP call and a [`Store`]. It derives the
//! bucket's key from the subject, and holds the policy for faults: a transient fault of the
//! store (busy, timed out, unreachable) or a fault of the storage itself (disk full, I/O error,
//! read-only, corrupt; counted as `storage_errors` too) is an "unavailable" decision, counted
//! once, and allowed only when the operator chose `fail_open`, never with a lease; what an
//! operator must fix first (a path that cannot be created) is an error. Faults, recoveries and
//! fail-open admissions go to the operations log.
//! It also keeps the leases the current request holds, so that they are released at its end
//! (at most [`MAX_HELD`] of them: see [`Limiter::hold`]).
//! No PHP here: the glue parses arguments, calls this, and builds a `Decision`.

use crate::core::bucket::Policy;
use crate::core::config::DryRun;
use crate::core::counters::{Counters, Stats};
use crate::core::decision::{Ask, Reason, Request, Verdict};
use crate::core::lease::LeaseToken;
use crate::core::request::{Kind, Limit, Terms};
use crate::core::subject::{normalise, BucketKey};
use crate::keyring::KeyRing;
use crate::opslog::{Event, OpsLog};
use crate::storage::{Acquired, AcquiredAll, Answer, BucketView, Store, StoreError, StoreExt};
use std::sync::Arc;

/// The settings the limiter applies to every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub fail_open: bool,
    pub lease_ttl_ms: u64,
    pub ipv6_prefix: u8,
    /// Shadow scopes: their rate and in-flight denials are answered `allowed` (by the core's
    /// `decide`, inside the store's atomic step, counted as `dry_run_denied`). An "unavailable"
    /// decision stays what it is: only `fail_open` admits it.
    pub dry_run: DryRun,
    /// How long an admission with a request id is remembered (with a lease, at least as long
    /// as the lease).
    pub request_ttl_ms: u64,
    /// How many times a remembered admission may be replayed (`ratelimit.request_replays`).
    pub request_replays: u32,
}

/// The most leases one worker keeps for the end of its request. A long-running worker whose
/// requests never end (RoadRunner, Swoole without `ratelimit_end_request()`) would otherwise
/// grow the list without bound; a request legitimately holding this many slots at once is not
/// expected.
pub const MAX_HELD: usize = 1024;

pub struct Limiter {
    store: Box<dyn Store>,
    keys: KeyRing,
    settings: Settings,
    /// Counts not written yet (the step that made them failed, or a layer of the store added
    /// them): handed down with every step, and cleared by the store that writes them, so each
    /// is counted once.
    unwritten: Counters,
    /// Leases taken during the current request and not yet released, oldest first; at most
    /// [`MAX_HELD`].
    held: Vec<LeaseToken>,
    log: Arc<OpsLog>,
    /// What failed last, while the store is failing: logged again when it recovers.
    failing: Option<String>,
}

impl Limiter {
    pub fn new(store: Box<dyn Store>, keys: KeyRing, settings: Settings, log: Arc<OpsLog>) -> Self {
        Self {
            store,
            keys,
            settings,
            unwritten: Counters::default(),
            held: Vec::new(),
            log,
            failing: None,
        }
    }

    /// Whether `e` is answered with an "unavailable" decision; counts and logs it if so.
    fn undecidable(&mut self, e: &StoreError) -> bool {
        if e.kind().is_storage_fault() {
            self.unwritten.storage_errors += 1;
            self.log.note(Event::StorageUnavailable, e.what());
            self.failing = Some(e.what().to_string());
        }
        e.kind().answer() == Answer::Unavailable
    }

    /// A step succeeded: a fault, if any, is over.
    fn succeeded(&mut self) {
        if let Some(what) = self.failing.take() {
            self.log.note(Event::StorageRecovered, &what);
        }
    }

    /// Where `subject` in `scope` is stored: addresses normalised, then pseudonymised.
    pub fn key(&self, scope: &str, subject: &[u8]) -> BucketKey {
        let subject = normalise(subject, self.settings.ipv6_prefix);
        self.keys.key(scope.as_bytes(), &subject)
    }

    /// The key is the store's (checked at most once a second), then where `subject` lives. A
    /// fault of the store met while checking is the call's, answered as the call's would be.
    fn key_for(&mut self, scope: &str, subject: &[u8]) -> Result<BucketKey, StoreError> {
        self.keys
            .check(self.store.as_mut(), &mut self.unwritten, &self.log)?;
        Ok(self.key(scope, subject))
    }

    /// One decision. A transient fault answers "unavailable" instead of failing.
    pub fn acquire(
        &mut self,
        subject: &[u8],
        scope: &str,
        ask: &Ask,
    ) -> Result<Acquired, StoreError> {
        self.acquire_request(subject, scope, ask, None)
    }

    /// One decision, for the request `request_id` when given: a retry of an admission of the
    /// same subject, scope and id is judged by `core::request` (in progress while the first
    /// admission's lease lives, then replayed, taking nothing, while it asks for the same terms
    /// and replays are left; otherwise charged). The shadow mode of the scope is applied here
    /// (the caller's `ask` says neither).
    pub fn acquire_request(
        &mut self,
        subject: &[u8],
        scope: &str,
        ask: &Ask,
        request_id: Option<&[u8]>,
    ) -> Result<Acquired, StoreError> {
        let ttl = self.settings.lease_ttl_ms;
        let mut ask = *ask;
        ask.dry_run = self.settings.dry_run.covers(scope);
        let result = match self.key_for(scope, subject) {
            Ok(key) => {
                let limit = Limit {
                    scope,
                    policy: ask.policy,
                    cost: ask.cost,
                };
                let terms = || Terms::of(Kind::Acquire, &[limit], ask.max_inflight);
                ask.request = self.request(scope, subject, request_id, terms);
                self.store.acquire(&key, &ask, ttl, &mut self.unwritten)
            }
            Err(e) => Err(e),
        };
        let acquired = self.settle(result, |a| &a.verdict, Acquired::unavailable)?;
        self.hold(acquired.lease);
        Ok(acquired)
    }

    /// The request id's remembered name in `scope`, with the call's terms, when it has one
    /// (the terms, a SHA-256, are computed only then).
    fn request(
        &self,
        scope: &str,
        subject: &[u8],
        id: Option<&[u8]>,
        terms: impl FnOnce() -> Terms,
    ) -> Option<Request> {
        id.map(|id| Request {
            name: self.keys.request(
                scope.as_bytes(),
                &normalise(subject, self.settings.ipv6_prefix),
                id,
            ),
            ttl_ms: self.settings.request_ttl_ms,
            terms: terms(),
            replays: self.settings.request_replays,
        })
    }

    /// The fault policy of a decision, in one place: a transient or storage fault is an
    /// "unavailable" decision (counted, written by the next successful step), and only an
    /// operator's explicit choice turns "no decision" into an allow, never with a lease.
    fn settle<T>(
        &mut self,
        result: Result<T, StoreError>,
        verdict: impl Fn(&T) -> &Verdict,
        unavailable: impl Fn(bool) -> T,
    ) -> Result<T, StoreError> {
        let decided = match result {
            Ok(a) => {
                self.succeeded();
                a
            }
            Err(e) if self.undecidable(&e) => {
                self.unwritten.record(Reason::Unavailable);
                unavailable(false)
            }
            Err(e) => return Err(e),
        };
        if verdict(&decided).reason != Reason::Unavailable {
            return Ok(decided);
        }
        if self.settings.fail_open {
            self.log
                .note(Event::FailOpenAdmitting, "ratelimit.fail_open=1");
        }
        Ok(unavailable(self.settings.fail_open))
    }

    /// Keeps a lease taken for release at request end. (A replay holds none: the lease of the
    /// admission it repeats stays with the request that took it.) Past [`MAX_HELD`] the oldest
    /// is let go of, not released: it may still be in use (a Swoole coroutine's, a job's), and
    /// freeing a slot in use would admit more than `inflight` allows; left alone, it ends when
    /// released by its token or at `lease_ttl`, as a lease of a crashed worker does.
    fn hold(&mut self, lease: Option<LeaseToken>) {
        if let Some(token) = lease {
            if !self.held.contains(&token) {
                if self.held.len() >= MAX_HELD {
                    self.held.remove(0);
                    self.log
                        .note(Event::HeldOverflow, &format!("{MAX_HELD} leases held"));
                }
                self.held.push(token);
            }
        }
    }

    /// Compound limits, all or nothing: `asks[i]` in scope `scopes[i]` of one subject, in one
    /// atomic step of the store (see [`Store::acquire_all`]). The shadow mode of each scope and
    /// the fault policy are those of [`Self::acquire_request`]; a slot and the request id
    /// belong to the first limit. A path of its own, so that a single call costs no more.
    pub fn acquire_all(
        &mut self,
        subject: &[u8],
        scopes: &[&str],
        asks: &[Ask],
        request_id: Option<&[u8]>,
    ) -> Result<AcquiredAll, StoreError> {
        let ttl = self.settings.lease_ttl_ms;
        let mut asks = asks.to_vec();
        for (a, scope) in asks.iter_mut().zip(scopes) {
            a.dry_run = self.settings.dry_run.covers(scope);
            a.request = None;
        }
        let result = match self
            .keys
            .check(self.store.as_mut(), &mut self.unwritten, &self.log)
        {
            Ok(()) => {
                let keys: Vec<BucketKey> = scopes.iter().map(|s| self.key(s, subject)).collect();
                let limits: Vec<Limit<'_>> = scopes
                    .iter()
                    .zip(&asks)
                    .map(|(scope, a)| Limit {
                        scope,
                        policy: a.policy,
                        cost: a.cost,
                    })
                    .collect();
                let inflight = asks[0].max_inflight;
                let terms = || Terms::of(Kind::AcquireAll, &limits, inflight);
                asks[0].request = self.request(scopes[0], subject, request_id, terms);
                self.store
                    .acquire_all(&keys, &asks, ttl, &mut self.unwritten)
            }
            Err(e) => Err(e),
        };
        let n = asks.len();
        let acquired = self.settle(
            result,
            |a| &a.verdict,
            |fail_open| AcquiredAll::unavailable(n, fail_open),
        )?;
        self.hold(acquired.lease);
        Ok(acquired)
    }

    /// What a call of cost 1 would get now, without taking anything (nor counting).
    pub fn peek(
        &mut self,
        subject: &[u8],
        scope: &str,
        policy: &Policy,
    ) -> Result<Verdict, StoreError> {
        let result = match self.key_for(scope, subject) {
            Ok(key) => self.store.peek(&key, policy, &mut self.unwritten),
            Err(e) => Err(e),
        };
        match result {
            Err(e) if self.undecidable(&e) => Ok(Verdict::unavailable(self.settings.fail_open)),
            other => other,
        }
    }

    /// Frees one lease, from any process; true when it was live. When the store cannot be
    /// written now, the lease stays with the request (tried again at its end) and false is
    /// returned: it expires at its `lease_ttl` regardless.
    pub fn release(&mut self, token: &LeaseToken) -> Result<bool, StoreError> {
        match self
            .store
            .release(std::slice::from_ref(token), &mut self.unwritten)
        {
            Ok(freed) => {
                self.succeeded();
                self.held.retain(|t| t != token);
                Ok(freed > 0)
            }
            Err(e) if self.undecidable(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives `cost` tokens back to a bucket (see `core::bucket::refund`); true when some were.
    /// A store that cannot be written now gives nothing back and answers false (never an
    /// error, never retried: the tokens stay taken, which can only deny, never admit, more).
    pub fn refund(
        &mut self,
        subject: &[u8],
        scope: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<bool, StoreError> {
        let result = match self.key_for(scope, subject) {
            Ok(key) => self.store.refund(&key, policy, cost, &mut self.unwritten),
            Err(e) => Err(e),
        };
        match result {
            Ok(given) => {
                self.succeeded();
                Ok(given)
            }
            Err(e) if self.undecidable(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Forgets a bucket and its leases.
    pub fn reset(&mut self, subject: &[u8], scope: &str) -> Result<bool, StoreError> {
        let key = self.key_for(scope, subject)?;
        let forgot = self.store.reset(&key, &mut self.unwritten)?;
        self.succeeded();
        Ok(forgot)
    }

    /// The shared counters, with the counts this process could not write yet. A store that
    /// cannot be read now (busy, down) gives partial stats (this process's counts), never an
    /// error: an operator is never blind during an outage.
    pub fn stats(&mut self) -> Result<Stats, StoreError> {
        let mut s = match self.store.stats(&mut self.unwritten) {
            Ok(s) => s,
            Err(e) if e.kind().answer() == Answer::Unavailable => Stats {
                partial: true,
                ..Stats::default()
            },
            Err(e) => return Err(e),
        };
        s.counters.add(&self.unwritten);
        Ok(s)
    }

    /// The pressure view: the `n` buckets with the most denials (see [`crate::storage::Reports::top`]);
    /// empty while the store cannot be read.
    pub fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError> {
        match self.store.top(n, &mut self.unwritten) {
            Err(e) if e.kind().answer() == Answer::Unavailable => Ok(Vec::new()),
            r => r,
        }
    }

    /// The request is over: releases what it still holds, and returns how many of those were
    /// live (a lease already released by its token elsewhere, or expired, frees nothing). A
    /// failure is left to the leases' expiry, since there is nobody left to tell: 0 then.
    pub fn end_request(&mut self) -> u64 {
        let held = std::mem::take(&mut self.held);
        let mut freed = 0;
        if !held.is_empty() {
            if let Ok(n) = self.store.release(&held, &mut self.unwritten) {
                self.succeeded();
                freed = n;
            }
        }
        self.store.tick(&mut self.unwritten);
        freed
    }

    /// The process is ending: writes what is still held back. Best effort.
    pub fn shutdown(&mut self) {
        self.end_request();
        let _ = self.store.flush(&mut self.unwritten);
    }

    /// Leases the current request holds.
    pub fn held(&self) -> &[LeaseToken] {
        &self.held
    }
}

#[cfg(test)]
mod tests {
    //! The limiter's policy, against a fake store that answers what each test scripts. (The
    //! stores themselves are tested on real backends, in tests/.)
    use super::*;
    use crate::core::lease::LeaseId;
    use crate::storage::{ErrorKind, Query, Reply};
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Default)]
    struct Script {
        /// Errors to return, first to last, before answering normally.
        faults: Vec<ErrorKind>,
        /// The `unwritten` counts each call was given.
        seen: Vec<Counters>,
        released: Vec<LeaseToken>,
        written: Counters,
        /// The asks the store was given.
        asks: Vec<Ask>,
        /// Answer as a replay (no lease).
        replay: bool,
        /// Leases handed out so far: each gets its own id.
        leases: u32,
        /// A fault of the stats and top reads only.
        read_fault: Option<ErrorKind>,
    }

    struct Fake(Rc<RefCell<Script>>);

    impl Fake {
        fn next_lease(&self) -> LeaseId {
            let mut s = self.0.borrow_mut();
            s.leases += 1;
            let mut id = [7; 16];
            id[..4].copy_from_slice(&s.leases.to_le_bytes());
            LeaseId(id)
        }

        fn step(&self, carry: &mut Counters) -> Result<(), StoreError> {
            let mut s = self.0.borrow_mut();
            s.seen.push(*carry);
            if s.faults.is_empty() {
                s.written.add(&std::mem::take(carry));
                Ok(())
            } else {
                Err(StoreError::new(s.faults.remove(0), "fake"))
            }
        }
    }

    fn allowed(lease: Option<LeaseToken>) -> Acquired {
        let mut verdict = Verdict::unavailable(true);
        verdict.reason = Reason::Ok;
        verdict.source = crate::core::decision::Source::Store;
        Acquired { verdict, lease }
    }

    impl Store for Fake {
        fn acquire(
            &mut self,
            key: &BucketKey,
            ask: &Ask,
            _: u64,
            carry: &mut Counters,
        ) -> Result<Acquired, StoreError> {
            self.step(carry)?;
            self.0.borrow_mut().asks.push(*ask);
            let replay = self.0.borrow().replay;
            let lease = (ask.max_inflight > 0 && !replay).then(|| LeaseToken {
                id: self.next_lease(),
                key: *key,
            });
            let mut a = allowed(lease);
            a.verdict.replay = replay;
            Ok(a)
        }
        fn acquire_all(
            &mut self,
            keys: &[BucketKey],
            asks: &[Ask],
            _: u64,
            carry: &mut Counters,
        ) -> Result<crate::storage::AcquiredAll, StoreError> {
            self.step(carry)?;
            self.0.borrow_mut().asks.extend_from_slice(asks);
            let lease = (asks[0].max_inflight > 0).then(|| LeaseToken {
                id: self.next_lease(),
                key: keys[0],
            });
            let a = allowed(lease);
            Ok(crate::storage::AcquiredAll {
                verdict: a.verdict,
                each: vec![a.verdict; asks.len()],
                reported: 0,
                lease,
            })
        }
        fn peek(
            &mut self,
            _: &BucketKey,
            _: &Policy,
            _: &mut Counters,
        ) -> Result<Verdict, StoreError> {
            self.step(&mut Counters::default())?;
            Ok(allowed(None).verdict)
        }
        fn release(&mut self, l: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
            self.step(carry)?;
            self.0.borrow_mut().released.extend_from_slice(l);
            Ok(l.len() as u64)
        }
        fn reset(&mut self, _: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
            self.step(carry)?;
            Ok(true)
        }
        fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
            Ok(match q {
                Query::KeyRecord => Reply::KeyRecord(None),
                Query::RecordKey(..) => Reply::Recorded(true),
                Query::Top(_) | Query::Stats if self.0.borrow().read_fault.is_some() => {
                    let kind = self.0.borrow().read_fault.expect("matched");
                    return Err(StoreError::new(kind, "fake read"));
                }
                Query::Top(_) => Reply::Top(Vec::new()),
                Query::Stats => Reply::Stats(Stats {
                    counters: self.0.borrow().written,
                    ..Stats::default()
                }),
                Query::Flush => {
                    self.step(carry)?;
                    Reply::Done
                }
                Query::AddDenials(_) | Query::Tick => Reply::Done,
                Query::RefillEpoch => Reply::Epoch(crate::storage::RefillEpoch::Untracked),
                Query::Node(_) => Reply::Node(None),
                Query::Refund(..) => {
                    self.step(carry)?;
                    Reply::Refunded(true)
                }
            })
        }
    }

    fn limiter(faults: &[ErrorKind], fail_open: bool) -> (Limiter, Rc<RefCell<Script>>) {
        let script = Rc::new(RefCell::new(Script {
            faults: faults.to_vec(),
            ..Script::default()
        }));
        let settings = Settings {
            fail_open,
            lease_ttl_ms: 60_000,
            ipv6_prefix: 64,
            dry_run: DryRun::Scopes(vec!["shadow".into()]),
            request_ttl_ms: 60_000,
            request_replays: 3,
        };
        (
            Limiter::new(
                Box::new(Fake(Rc::clone(&script))),
                KeyRing::of(&[7; 32]),
                settings,
                OpsLog::none(),
            ),
            script,
        )
    }

    fn ask(inflight: u64) -> Ask {
        Ask::new(Policy::new(5, 1_000).unwrap(), 1, inflight)
    }

    #[test]
    fn an_unavailable_decision_stays_one_in_a_shadow_scope() {
        let (mut l, _) = limiter(&[ErrorKind::Busy], false);
        let a = l.acquire(b"s", "shadow", &ask(1)).unwrap();
        assert_eq!(
            (a.verdict.allowed, a.verdict.reason, a.verdict.dry_run),
            (false, Reason::Unavailable, false)
        );
    }

    #[test]
    fn the_store_is_told_the_shadow_scope_and_the_request_name() {
        let (mut l, script) = limiter(&[], false);
        l.acquire_request(b"s", "shadow", &ask(0), Some(b"id"))
            .unwrap();
        l.acquire(b"s", "default", &ask(0)).unwrap();
        let asks = script.borrow().asks.clone();
        assert!(asks[0].dry_run && !asks[1].dry_run);
        let name = asks[0].request.expect("a request id was given").name;
        assert_eq!(name, l.keys.request(b"shadow", b"s", b"id"));
        assert_ne!(name, l.key("shadow", b"s").bucket);
        assert_eq!(asks[1].request, None);
    }

    #[test]
    fn a_replay_holds_nothing() {
        let (mut l, script) = limiter(&[], false);
        l.acquire_request(b"s", "default", &ask(1), Some(b"id"))
            .unwrap();
        assert_eq!(l.held().len(), 1);
        l.end_request();
        script.borrow_mut().replay = true;
        let a = l
            .acquire_request(b"s", "default", &ask(1), Some(b"id"))
            .unwrap();
        assert!(a.lease.is_none() && a.verdict.replay);
        assert!(l.held().is_empty());
    }

    /// The terms a store compares a retry with: the kind of call, every limit's scope, limit,
    /// period and cost, and the slot count; the replay budget from the settings.
    #[test]
    fn the_store_is_told_the_terms_of_the_call() {
        let (mut l, script) = limiter(&[], false);
        let id = Some(&b"id"[..]);
        l.acquire_request(b"s", "a", &ask(1), id).unwrap();
        l.acquire_request(b"s", "a", &ask(1), id).unwrap();
        let mut costly = ask(1);
        costly.cost = 2;
        l.acquire_request(b"s", "a", &costly, id).unwrap();
        l.acquire_request(b"s", "a", &ask(0), id).unwrap();
        l.acquire_all(b"s", &["a"], &[ask(1)], id).unwrap();
        l.acquire_all(b"s", &["a", "b"], &[ask(1), ask(0)], id)
            .unwrap();
        let asks = script.borrow().asks.clone();
        let r: Vec<Request> = asks.iter().filter_map(|a| a.request).collect();
        assert_eq!(r.len(), 6);
        assert_eq!(r[0], r[1], "the same call, the same request");
        assert_eq!(r[0].replays, 3);
        for (i, other) in r.iter().enumerate().skip(2) {
            assert_eq!(other.name, r[0].name, "one id in scope a: {i}");
            assert_ne!(other.terms, r[0].terms, "call {i}");
        }
        assert_ne!(r[4].terms, r[5].terms);
        let expected = Terms::of(
            Kind::Acquire,
            &[Limit {
                scope: "a",
                policy: ask(1).policy,
                cost: 1,
            }],
            1,
        );
        assert_eq!(r[0].terms, expected);
    }

    #[test]
    fn a_compound_call_tells_each_scope_its_shadow_mode_and_the_first_the_request() {
        let (mut l, script) = limiter(&[], false);
        l.acquire_all(b"s", &["default", "shadow"], &[ask(1), ask(0)], Some(b"id"))
            .unwrap();
        let asks = script.borrow().asks.clone();
        assert_eq!(
            asks.iter()
                .map(|a| (a.dry_run, a.request.is_some()))
                .collect::<Vec<_>>(),
            [(false, true), (true, false)]
        );
        assert_eq!(l.held().len(), 1, "its lease is held by the request");
    }

    #[test]
    fn a_compound_call_on_a_busy_store_is_an_unavailable_denial_for_every_limit() {
        let (mut l, _) = limiter(&[ErrorKind::Busy], false);
        let a = l
            .acquire_all(b"s", &["a", "b"], &[ask(0), ask(0)], None)
            .unwrap();
        assert_eq!(
            (a.verdict.allowed, a.verdict.reason),
            (false, Reason::Unavailable)
        );
        assert!(a.each.iter().all(|v| v.reason == Reason::Unavailable) && a.each.len() == 2);
    }

    #[test]
    fn a_busy_store_is_an_unavailable_denial() {
        let (mut l, _) = limiter(&[ErrorKind::Busy], false);
        let a = l.acquire(b"s", "default", &ask(1)).unwrap();
        assert_eq!(
            (a.verdict.allowed, a.verdict.reason),
            (false, Reason::Unavailable)
        );
        assert_eq!(a.lease, None);
    }

    #[test]
    fn a_reservation_on_a_busy_store_is_a_denial_never_a_booking() {
        let (mut l, _) = limiter(&[ErrorKind::Busy], false);
        let a = l
            .acquire(b"s", "default", &ask(0).reserving(u64::MAX))
            .unwrap();
        assert_eq!(
            (a.verdict.allowed, a.verdict.reason, a.verdict.wait_ms),
            (false, Reason::Unavailable, 0)
        );
    }

    #[test]
    fn fail_open_admits_an_unavailable_decision_without_a_lease() {
        let (mut l, _) = limiter(&[ErrorKind::Timeout], true);
        let a = l.acquire(b"s", "default", &ask(1)).unwrap();
        assert_eq!(
            (a.verdict.allowed, a.verdict.reason),
            (true, Reason::Unavailable)
        );
        assert_eq!(a.lease, None);
        assert!(l.held().is_empty());
    }

    #[test]
    fn an_undecidable_call_names_fail_open_as_its_source_whichever_way_it_went() {
        use crate::core::decision::Source;
        let (mut l, _) = limiter(&[ErrorKind::Timeout], true);
        assert_eq!(
            l.acquire(b"s", "default", &ask(0)).unwrap().verdict.source,
            Source::FailOpen
        );
        let (mut l, _) = limiter(&[ErrorKind::Timeout], false);
        assert_eq!(
            l.acquire(b"s", "default", &ask(0)).unwrap().verdict.source,
            Source::FailOpen,
            "a denial for want of a store is fail_open's too: it decided to deny"
        );
        let (mut l, _) = limiter(&[], true);
        assert_eq!(
            l.acquire(b"s", "default", &ask(0)).unwrap().verdict.source,
            Source::Store
        );
    }

    #[test]
    fn an_unavailable_decision_is_written_once_with_the_next_step() {
        let (mut l, script) = limiter(&[ErrorKind::Busy, ErrorKind::Unreachable], false);
        l.acquire(b"s", "default", &ask(0)).unwrap();
        l.acquire(b"s", "default", &ask(0)).unwrap();
        assert_eq!(
            l.stats().unwrap().counters.unavailable,
            2,
            "counted before written"
        );
        l.acquire(b"s", "default", &ask(0)).unwrap();
        l.acquire(b"s", "default", &ask(0)).unwrap();
        let seen: Vec<u64> = script.borrow().seen.iter().map(|c| c.unavailable).collect();
        assert_eq!(seen, [0, 1, 2, 0]);
        assert_eq!(l.stats().unwrap().counters.unavailable, 2);
    }

    #[test]
    fn a_storage_fault_is_an_unavailable_decision_counted_as_a_storage_error() {
        for kind in [ErrorKind::Corrupt, ErrorKind::Io, ErrorKind::Full] {
            let (mut l, _) = limiter(&[kind], false);
            let a = l.acquire(b"s", "default", &ask(1)).unwrap();
            assert_eq!(
                (a.verdict.allowed, a.verdict.reason),
                (false, Reason::Unavailable)
            );
            let c = l.stats().unwrap().counters;
            assert_eq!((c.unavailable, c.storage_errors), (1, 1), "{kind:?}");
        }
    }

    #[test]
    fn decisions_resume_when_the_storage_fault_ends() {
        let (mut l, script) = limiter(&[ErrorKind::Full, ErrorKind::Full], false);
        l.acquire(b"s", "default", &ask(0)).unwrap();
        l.acquire(b"s", "default", &ask(0)).unwrap();
        assert!(l.acquire(b"s", "default", &ask(0)).unwrap().verdict.allowed);
        let w = script.borrow().written;
        assert_eq!(
            (w.unavailable, w.storage_errors),
            (2, 2),
            "written once, by the next step"
        );
    }

    #[test]
    fn misconfiguration_is_an_error_not_a_decision() {
        let (mut l, _) = limiter(&[ErrorKind::Misconfigured], true);
        let e = l.acquire(b"s", "default", &ask(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
    }

    #[test]
    fn a_fault_and_its_end_are_logged_once_each() {
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = {
            let lines = Arc::clone(&lines);
            OpsLog::new(
                move |l| lines.lock().unwrap().push(l.to_string()),
                Arc::new(|| 0),
            )
        };
        let (mut l, _) = limiter(&[ErrorKind::Full, ErrorKind::Full, ErrorKind::Full], false);
        l.log = log;
        for _ in 0..4 {
            l.acquire(b"secret-subject", "default", &ask(0)).unwrap();
        }
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("storage unavailable") && lines[1].contains("available again"));
        assert!(lines.iter().all(|l| !l.contains("secret-subject")));
    }

    #[test]
    fn a_release_that_cannot_be_written_stays_with_the_request() {
        let (mut l, script) = limiter(&[], false);
        let token = l.acquire(b"s", "default", &ask(1)).unwrap().lease.unwrap();
        script.borrow_mut().faults.push(ErrorKind::Busy);
        assert!(!l.release(&token).unwrap());
        assert_eq!(l.held(), &[token]);
        l.end_request();
        assert_eq!(script.borrow().released, [token]);
        assert!(l.held().is_empty());
    }

    #[test]
    fn a_released_lease_is_not_released_again_at_request_end() {
        let (mut l, script) = limiter(&[], false);
        let token = l.acquire(b"s", "default", &ask(1)).unwrap().lease.unwrap();
        assert!(l.release(&token).unwrap());
        l.end_request();
        assert_eq!(script.borrow().released, [token]);
    }

    #[test]
    fn request_end_frees_what_the_request_still_holds_and_says_how_many() {
        let (mut l, script) = limiter(&[], false);
        let tokens: Vec<LeaseToken> = (0..3)
            .map(|_| l.acquire(b"s", "default", &ask(5)).unwrap().lease.unwrap())
            .collect();
        assert!(l.release(&tokens[1]).unwrap());
        assert_eq!(l.end_request(), 2, "the two leases not released");
        assert_eq!(l.end_request(), 0, "nothing is held any more");
        let mut released = script.borrow().released.clone();
        released.sort_by_key(|t| t.id.0);
        assert_eq!(released, tokens, "each released once");
    }

    #[test]
    fn a_request_end_that_cannot_be_written_frees_nothing_and_forgets_the_leases() {
        let (mut l, script) = limiter(&[], false);
        l.acquire(b"s", "default", &ask(1)).unwrap();
        script.borrow_mut().faults.push(ErrorKind::Busy);
        assert_eq!(l.end_request(), 0);
        assert!(l.held().is_empty(), "left to lease_ttl");
    }

    /// A long-running worker whose requests never end keeps at most MAX_HELD leases; the
    /// oldest is let go of (ended by its token or lease_ttl), never released while it may be
    /// in use, and the operator is told once.
    #[test]
    fn the_held_leases_are_bounded_and_the_oldest_is_let_go_of_unreleased() {
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (mut l, script) = limiter(&[], false);
        l.log = {
            let lines = Arc::clone(&lines);
            OpsLog::new(
                move |l| lines.lock().unwrap().push(l.to_string()),
                Arc::new(|| 0),
            )
        };
        let tokens: Vec<LeaseToken> = (0..MAX_HELD + 10)
            .map(|_| {
                l.acquire(b"secret-subject", "default", &ask(u64::MAX))
                    .unwrap()
                    .lease
                    .unwrap()
            })
            .collect();
        assert_eq!(l.held(), &tokens[10..], "the newest MAX_HELD, oldest first");
        assert!(
            script.borrow().released.is_empty(),
            "nothing released early"
        );
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("ratelimit_end_request()") && lines[0].contains("1024 leases held"),
            "{lines:?}"
        );
        assert!(!lines[0].contains("secret-subject"));
        assert_eq!(l.end_request(), MAX_HELD as u64);
        assert_eq!(script.borrow().released, &tokens[10..]);
    }

    #[test]
    fn stats_and_top_of_a_store_that_cannot_be_read_are_partial_not_errors() {
        let (mut l, script) = limiter(&[ErrorKind::Busy], false);
        l.acquire(b"s", "default", &ask(0)).unwrap();
        script.borrow_mut().read_fault = Some(ErrorKind::Timeout);
        let s = l.stats().unwrap();
        assert!(s.partial);
        assert_eq!(s.counters.unavailable, 1, "this process's counts");
        assert_eq!(l.top(10).unwrap(), Vec::new());
        script.borrow_mut().read_fault = Some(ErrorKind::Misconfigured);
        assert!(
            l.stats().is_err() && l.top(10).is_err(),
            "what an operator must fix"
        );
        script.borrow_mut().read_fault = None;
        assert!(!l.stats().unwrap().partial, "readable again");
    }

    #[test]
    fn a_busy_peek_is_unavailable_and_uncounted() {
        let (mut l, _) = limiter(&[ErrorKind::Busy], false);
        let v = l.peek(b"s", "default", &ask(0).policy).unwrap();
        assert_eq!((v.allowed, v.reason), (false, Reason::Unavailable));
        assert_eq!(l.stats().unwrap().counters.unavailable, 0);
    }

    #[test]
    fn a_refund_the_store_cannot_take_gives_nothing_back_and_is_no_error() {
        let (mut l, _) = limiter(&[ErrorKind::Timeout], true);
        // Even with fail_open: a refund is never answered by it.
        assert!(!l.refund(b"s", "default", &ask(0).policy, 1).unwrap());
        assert!(
            l.refund(b"s", "default", &ask(0).policy, 1).unwrap(),
            "the store back"
        );
    }

    #[test]
    fn a_refund_on_a_misconfigured_store_is_the_calls_error() {
        let (mut l, _) = limiter(&[ErrorKind::Misconfigured], false);
        let e = l.refund(b"s", "default", &ask(0).policy, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
    }

    #[test]
    fn addresses_share_a_key_however_they_are_spelled() {
        let (l, _) = limiter(&[], false);
        assert_eq!(l.key("a", b"::ffff:192.0.2.1"), l.key("a", b"192.0.2.1"));
        assert_eq!(l.key("a", b"2001:db8::1"), l.key("a", b"2001:db8::2"));
        assert_ne!(l.key("a", b"x").bucket, l.key("b", b"x").bucket);
        assert_eq!(l.key("a", b"x").group, l.key("b", b"x").group);
    }
}
