//! [`Fallback`]: decisions keep being made while the primary store (Redis) is unavailable, by
//! this host's local store (its SQLite file), opened only when first needed.
//!
//! A call goes to the primary; when it fails with a transient fault or a fault of the storage
//! (its breaker open is one: `Unreachable`), the local store decides instead: the verdict's
//! source is [`Source::Fallback`], counted `fallback_decisions` (and under its reason, by the
//! local store) in that store's same step. The limit becomes per host during the outage, never
//! per worker. What an operator must fix (`Misconfigured`) is not hidden: it is the call's
//! error. The breaker's openings ([`Store::take_openings`], made by one process per host)
//! are counted as `fallback_switches` and logged, so a switch counts once per host; with a
//! primary that has no breaker, none are counted.
//!
//! Counts this wrapper holds (the breaker's `redis_errors`, handed over on each failure, and
//! the switches) go down in `unwritten` with the next call to whichever store answers, and are
//! cleared only when it succeeds. `ratelimit_stats()` sums both stores: the primary's counters
//! plus this host's local ones (the decisions made here during outages); with the primary down,
//! the local ones alone.

use super::{
    Acquired, AcquiredAll, BucketView, Clock, Counters, ErrorKind, Stats, Store, StoreError,
};
use crate::core::breaker::BreakerState;
use crate::core::bucket::Policy;
use crate::core::decision::{Ask, Source, Verdict};
use crate::core::keyswitch::{Fingerprint, KeyRecord};
use crate::core::lease::LeaseToken;
use crate::core::subject::BucketKey;
use crate::opslog::{Event, OpsLog};
use std::sync::Arc;

/// Opens the local store; called on the first need (never at startup), again after a failure.
pub type LocalStore = Box<dyn FnMut() -> Result<Box<dyn Store>, StoreError>>;

/// Whether the local store answers in the primary's place.
fn falls_back(e: &StoreError) -> bool {
    e.is_transient() || e.kind().is_storage_fault()
}

fn add(a: &Stats, b: &Stats) -> Stats {
    let mut s = *a;
    s.counters.add(&b.counters);
    s.entries += b.entries;
    s.live_leases += b.live_leases;
    s
}

pub struct Fallback {
    primary: Box<dyn Store>,
    open_local: Option<LocalStore>,
    local: Option<Box<dyn Store>>,
    held: Counters,
    log: Arc<OpsLog>,
    /// See [`Fallback::pause_after_failure`]: the clock and the pause, and the last failure.
    pause: Option<(Clock, i64)>,
    failed_at: Option<i64>,
}

impl Fallback {
    /// `local`: None for no fallback (calls then only pass through).
    pub fn new(primary: Box<dyn Store>, local: Option<LocalStore>, log: Arc<OpsLog>) -> Self {
        Self {
            primary,
            open_local: local,
            local: None,
            held: Counters::default(),
            log,
            pause: None,
            failed_at: None,
        }
    }

    /// After a failure of the primary, goes straight to the local store for `ms` (the
    /// primary's timeout): the later steps of the same PHP call (a decision after its key
    /// check) never wait for a failing primary a second time, before the host's breaker opens.
    /// `clock`: monotonic milliseconds.
    pub fn pause_after_failure(mut self, clock: Clock, ms: u64) -> Self {
        self.pause = Some((clock, ms.min(i64::MAX as u64) as i64));
        self
    }

    fn primary_just_failed(&self) -> bool {
        match (&self.pause, self.failed_at, &self.open_local) {
            (Some((clock, ms)), Some(at), Some(_)) => {
                let now = clock();
                now >= at && now - at < *ms
            }
            _ => false,
        }
    }

    /// The primary failed: takes over what it held, and counts (and logs) an opening of the
    /// host's breaker made by this process as the host's switch to the fallback.
    fn absorb(&mut self, e: &StoreError) {
        self.held.add(&self.primary.take_unwritten());
        let switches = self.primary.take_openings();
        if switches > 0 && self.open_local.is_some() {
            self.held.fallback_switches += switches;
            self.log.note(Event::FallbackSwitched, e.what());
        }
    }

    /// The local store, opened if needed; None when there is no fallback.
    fn local(&mut self) -> Option<Result<&mut Box<dyn Store>, StoreError>> {
        if self.local.is_none() {
            let open = self.open_local.as_mut()?;
            match open() {
                Ok(s) => self.local = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
        self.local.as_mut().map(Ok)
    }

    /// `f` on the primary; on a fault the fallback answers, `f` on the local store. `extra`:
    /// what a step of the local store counts besides (a fallback decision).
    fn either<T>(
        &mut self,
        unwritten: &Counters,
        extra: Counters,
        mut f: impl FnMut(&mut dyn Store, &Counters) -> Result<T, StoreError>,
    ) -> Result<(T, bool), StoreError> {
        if !self.primary_just_failed() {
            let mut carried = *unwritten;
            carried.add(&self.held);
            let e = match f(self.primary.as_mut(), &carried) {
                Ok(v) => {
                    self.held = Counters::default();
                    return Ok((v, false));
                }
                Err(e) => e,
            };
            self.absorb(&e);
            if !falls_back(&e) {
                return Err(e);
            }
            if let Some((clock, _)) = &self.pause {
                self.failed_at = Some(clock());
            }
            if self.open_local.is_none() {
                return Err(e);
            }
        }
        let mut carried = *unwritten;
        carried.add(&self.held);
        carried.add(&extra);
        let local = match self.local() {
            None => {
                return Err(StoreError::new(
                    ErrorKind::Unreachable,
                    "primary store unavailable and no local fallback",
                ))
            }
            Some(local) => local?,
        };
        let v = f(local.as_mut(), &carried)?;
        self.held = Counters::default();
        Ok((v, true))
    }
}

impl Store for Fallback {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<Acquired, StoreError> {
        let extra = Counters {
            fallback_decisions: 1,
            ..Counters::default()
        };
        let (mut a, local) = self.either(unwritten, extra, |s, c| {
            s.acquire(key, ask, lease_ttl_ms, c)
        })?;
        if local {
            a.verdict.source = Source::Fallback;
        }
        Ok(a)
    }

    /// As [`Store::acquire`]: the local store decides the whole compound call when the
    /// primary cannot, in its own single step.
    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<AcquiredAll, StoreError> {
        let extra = Counters {
            fallback_decisions: 1,
            ..Counters::default()
        };
        let (mut a, local) = self.either(unwritten, extra, |s, c| {
            s.acquire_all(keys, asks, lease_ttl_ms, c)
        })?;
        if local {
            a.verdict.source = Source::Fallback;
            for v in &mut a.each {
                v.source = Source::Fallback;
            }
        }
        Ok(a)
    }

    fn peek(&mut self, key: &BucketKey, policy: &Policy) -> Result<Verdict, StoreError> {
        // Peeks count nothing: the held counts wait for a step that writes.
        let held = std::mem::take(&mut self.held);
        let r = self.either(&Counters::default(), Counters::default(), |s, _| {
            s.peek(key, policy)
        });
        self.held.add(&held);
        let (mut v, local) = r?;
        if local {
            v.source = Source::Fallback;
        }
        Ok(v)
    }

    /// A lease lives in the store that took it: the primary first, then, for those it did not
    /// find (or when it is unavailable), the local store. Unavailable and not all found
    /// locally: the primary's error, so that the caller tries again later (and, since nothing
    /// of the caller's was written, keeps its counts).
    fn release(&mut self, leases: &[LeaseToken], unwritten: &Counters) -> Result<u64, StoreError> {
        let mut carried = *unwritten;
        carried.add(&self.held);
        let e = match self.primary.release(leases, &carried) {
            Ok(n) => {
                self.held = Counters::default();
                if n >= leases.len() as u64 {
                    return Ok(n);
                }
                let local = match self.local() {
                    Some(Ok(l)) => l.release(leases, &Counters::default()).unwrap_or(0),
                    _ => 0,
                };
                return Ok(n + local);
            }
            Err(e) => e,
        };
        self.absorb(&e);
        if !falls_back(&e) {
            return Err(e);
        }
        // Only this wrapper's counts go down here: the caller's are written only if it is told
        // the release succeeded.
        let held = self.held;
        let freed = match self.local() {
            Some(Ok(l)) => l.release(leases, &held),
            _ => return Err(e),
        };
        match freed {
            Ok(n) => {
                self.held = Counters::default();
                if n < leases.len() as u64 {
                    return Err(e);
                }
                // Told it succeeded, the caller forgets its counts: they are ours to write.
                self.held = *unwritten;
                Ok(n)
            }
            Err(_) => Err(e),
        }
    }

    /// Forgets the bucket in both stores (the local one may keep what an outage decided).
    /// The primary unavailable: its error, after the local store forgot it too.
    fn reset(&mut self, key: &BucketKey, unwritten: &Counters) -> Result<bool, StoreError> {
        let mut carried = *unwritten;
        carried.add(&self.held);
        match self.primary.reset(key, &carried) {
            Ok(forgot) => {
                self.held = Counters::default();
                let local = match self.local() {
                    Some(Ok(l)) => l.reset(key, &Counters::default()).unwrap_or(false),
                    _ => false,
                };
                Ok(forgot || local)
            }
            Err(e) => {
                self.absorb(&e);
                let held = self.held;
                if let Some(Ok(l)) = self.local() {
                    if l.reset(key, &held).is_ok() {
                        self.held = Counters::default();
                    }
                }
                Err(e)
            }
        }
    }

    fn stats(&mut self) -> Result<Stats, StoreError> {
        let primary = self.primary.stats();
        if let Err(e) = &primary {
            self.absorb(e);
        }
        let local = self.local().map(|l| l.and_then(|l| l.stats()));
        let mut s = match (primary, local) {
            (Ok(p), None) | (Ok(p), Some(Err(_))) => p,
            (Ok(p), Some(Ok(l))) => add(&p, &l),
            (Err(e), Some(Ok(l))) if falls_back(&e) => l,
            (Err(e), _) => return Err(e),
        };
        s.counters.add(&self.held);
        s.breaker = self.primary.breaker();
        Ok(s)
    }

    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError> {
        let held = std::mem::take(&mut self.held);
        let r = self.either(&Counters::default(), Counters::default(), |s, _| s.top(n));
        self.held.add(&held);
        r.map(|(v, _)| v)
    }

    /// To the primary only: a deny cache sits in front of the primary's decisions.
    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        self.primary.add_denials(denials)
    }

    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        let held = std::mem::take(&mut self.held);
        let r = self.either(&Counters::default(), Counters::default(), |s, _| {
            s.key_record()
        });
        self.held.add(&held);
        r.map(|(v, _)| v)
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        let held = std::mem::take(&mut self.held);
        let r = self.either(&Counters::default(), Counters::default(), |s, _| {
            s.record_key(new, expected)
        });
        self.held.add(&held);
        r.map(|(v, _)| v)
    }

    fn tick(&mut self) {
        self.primary.tick();
        if let Some(l) = self.local.as_mut() {
            l.tick();
        }
    }

    fn flush(&mut self, unwritten: &Counters) -> Result<(), StoreError> {
        let mut carried = *unwritten;
        carried.add(&self.held);
        let e = match self.primary.flush(&carried) {
            Ok(()) => {
                self.held = Counters::default();
                if let Some(l) = self.local.as_mut() {
                    let _ = l.flush(&Counters::default());
                }
                return Ok(());
            }
            Err(e) => e,
        };
        self.absorb(&e);
        let mut carried = *unwritten;
        carried.add(&self.held);
        match self.local.as_mut().map(|l| l.flush(&carried)) {
            Some(Ok(())) => {
                self.held = Counters::default();
                Ok(())
            }
            _ => Err(e),
        }
    }

    fn breaker(&mut self) -> Option<BreakerState> {
        self.primary.breaker()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::breaker::BreakerState;
    use crate::core::config::BreakerConfig;
    use crate::core::decision::Reason;
    use crate::storage::breaker::Breaker;
    use crate::storage::fake::{key, Fake, Manual};
    use crate::storage::hostbreaker::HostBreaker;
    use crate::storage::ErrorKind;
    use std::cell::Cell;
    use std::os::unix::fs::PermissionsExt;
    use std::rc::Rc;

    fn ask(inflight: u64) -> Ask {
        Ask::new(Policy::new(2, 60_000).unwrap(), 1, inflight)
    }

    struct World {
        time: Manual,
        primary: Fake,
        local: Fake,
        opened: Rc<Cell<u32>>,
    }

    fn world() -> World {
        let time = Manual::at(1_000);
        World {
            primary: Fake::new(time.clock()),
            local: Fake::new(time.clock()),
            time,
            opened: Rc::default(),
        }
    }

    fn factory(w: &World) -> LocalStore {
        let (local, opened) = (w.local.clone(), Rc::clone(&w.opened));
        Box::new(move || {
            opened.set(opened.get() + 1);
            Ok(local.boxed())
        })
    }

    fn fallback(w: &World) -> Fallback {
        Fallback::new(w.primary.boxed(), Some(factory(w)), OpsLog::none())
    }

    #[test]
    fn a_failed_primary_is_not_asked_again_within_the_pause() {
        let w = world();
        let mut f = fallback(&w).pause_after_failure(w.time.clock(), 50);
        w.primary.fail(Some(ErrorKind::Timeout));
        // The key check fails over, then the decision of the same call goes local at once.
        f.key_record().unwrap();
        let asked = w.primary.calls();
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Fallback);
        assert_eq!(
            w.primary.calls(),
            asked,
            "the primary was not asked within the pause"
        );
        // After the pause it is asked again (and answers, now that it works).
        w.primary.fail(None);
        w.time.set(1_050);
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Store);
        assert_eq!(w.primary.calls(), asked + 1);
    }

    fn acquire(f: &mut Fallback, inflight: u64) -> Result<Acquired, StoreError> {
        f.acquire(&key(1), &ask(inflight), 60_000, &Counters::default())
    }

    #[test]
    fn a_compound_call_is_decided_locally_while_the_primary_is_unavailable() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Timeout));
        let a = f
            .acquire_all(
                &[key(1), key(2)],
                &[ask(0), ask(0)],
                60_000,
                &Counters::default(),
            )
            .unwrap();
        assert!(a.verdict.allowed);
        assert!(a
            .each
            .iter()
            .chain([&a.verdict])
            .all(|v| v.source == Source::Fallback));
        assert_eq!(w.local.written().fallback_decisions, 1);
    }

    #[test]
    fn the_primary_decides_while_it_answers_and_the_local_store_is_not_opened() {
        let w = world();
        let mut f = fallback(&w);
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Store);
        assert_eq!(w.opened.get(), 0, "not opened before it is needed");
    }

    #[test]
    fn on_a_transient_or_storage_fault_the_local_store_decides_and_says_so() {
        for kind in [ErrorKind::Timeout, ErrorKind::Unreachable, ErrorKind::Io] {
            let w = world();
            let mut f = fallback(&w);
            w.primary.fail(Some(kind));
            let a = acquire(&mut f, 0).unwrap();
            assert_eq!(
                (a.verdict.allowed, a.verdict.source),
                (true, Source::Fallback)
            );
            assert_eq!(w.local.written().allowed, 1, "{kind:?}");
            assert_eq!(
                w.local.written().fallback_decisions,
                1,
                "counted in the same step"
            );
        }
    }

    #[test]
    fn the_local_store_keeps_its_own_buckets_for_the_host() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        acquire(&mut f, 0).unwrap();
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(
            (a.verdict.reason, a.verdict.source),
            (Reason::Rate, Source::Fallback)
        );
    }

    #[test]
    fn a_misconfigured_primary_is_an_error_not_a_fallback() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Misconfigured));
        assert_eq!(
            acquire(&mut f, 0).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
        assert_eq!(w.local.calls(), 0);
    }

    #[test]
    fn without_a_local_store_the_primarys_fault_is_the_answer() {
        let w = world();
        let mut f = Fallback::new(w.primary.boxed(), None, OpsLog::none());
        w.primary.fail(Some(ErrorKind::Timeout));
        assert_eq!(acquire(&mut f, 0).unwrap_err().kind(), ErrorKind::Timeout);
    }

    #[test]
    fn a_local_store_that_cannot_be_opened_is_tried_again_at_the_next_need() {
        let w = world();
        let tries = Rc::new(Cell::new(0));
        let open: LocalStore = {
            let (local, tries) = (w.local.clone(), Rc::clone(&tries));
            Box::new(move || {
                tries.set(tries.get() + 1);
                if tries.get() == 1 {
                    Err(StoreError::new(ErrorKind::Busy, "local busy"))
                } else {
                    Ok(local.boxed())
                }
            })
        };
        let mut f = Fallback::new(w.primary.boxed(), Some(open), OpsLog::none());
        w.primary.fail(Some(ErrorKind::Timeout));
        assert_eq!(acquire(&mut f, 0).unwrap_err().what(), "local busy");
        assert_eq!(acquire(&mut f, 0).unwrap().verdict.source, Source::Fallback);
        assert_eq!(tries.get(), 2);
    }

    #[test]
    fn a_lease_taken_by_the_fallback_is_released_there() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Timeout));
        let lease = acquire(&mut f, 1).unwrap().lease.unwrap();
        w.primary.fail(None);
        assert_eq!(f.release(&[lease], &Counters::default()).unwrap(), 1);
        assert!(w.local.0.borrow().leases.is_empty());
        assert_eq!(w.primary.calls(), 2, "the primary was asked first");
    }

    #[test]
    fn a_release_of_a_primary_lease_while_it_is_down_is_an_error_to_try_again() {
        let w = world();
        let mut f = fallback(&w);
        let lease = acquire(&mut f, 1).unwrap().lease.unwrap();
        w.primary.fail(Some(ErrorKind::Timeout));
        let carried = Counters {
            unavailable: 1,
            ..Counters::default()
        };
        assert!(f.release(&[lease], &carried).is_err());
        assert_eq!(
            w.local.written().unavailable,
            0,
            "the caller's counts not written"
        );
    }

    #[test]
    fn held_counts_are_written_once_by_the_next_successful_step() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Timeout));
        let carried = Counters {
            unavailable: 1,
            ..Counters::default()
        };
        acquire(&mut f, 0).unwrap();
        f.acquire(&key(1), &ask(0), 60_000, &carried).unwrap();
        w.primary.fail(None);
        acquire(&mut f, 0).unwrap();
        let (p, l) = (w.primary.written(), w.local.written());
        assert_eq!(l.unavailable + p.unavailable, 1);
        assert_eq!(l.fallback_decisions + p.fallback_decisions, 2);
    }

    #[test]
    fn stats_sum_both_stores_and_fall_back_to_the_local_ones() {
        let w = world();
        let mut f = fallback(&w);
        acquire(&mut f, 0).unwrap();
        w.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        let s = f.stats().unwrap();
        assert_eq!((s.counters.allowed, s.counters.fallback_decisions), (1, 1));
        w.primary.fail(None);
        let s = f.stats().unwrap();
        assert_eq!((s.counters.allowed, s.entries), (2, 2));
    }

    #[test]
    fn a_reset_forgets_the_bucket_in_both_stores() {
        let w = world();
        let mut f = fallback(&w);
        w.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        w.primary.fail(None);
        acquire(&mut f, 0).unwrap();
        assert!(f.reset(&key(1), &Counters::default()).unwrap());
        assert!(w.primary.0.borrow().buckets.is_empty());
        assert!(w.local.0.borrow().buckets.is_empty());
    }

    /// Two workers of one host, each with its breaker and fallback, on one breaker file.
    fn host_workers() -> (tempfile::TempDir, World, Fallback, Fallback) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().join("db.breaker");
        let w = world();
        let cfg = BreakerConfig {
            failures: 2,
            window_ms: 10_000,
            retry_ms: 1_000,
        };
        let mk = |w: &World| {
            let b = Breaker::new(
                w.primary.boxed(),
                HostBreaker::open(&path).unwrap(),
                cfg,
                50,
                w.time.clock(),
                OpsLog::none(),
            );
            Fallback::new(Box::new(b), Some(factory(w)), OpsLog::none())
        };
        let (a, b) = (mk(&w), mk(&w));
        (dir, w, a, b)
    }

    #[test]
    fn a_switch_is_counted_once_per_host_however_many_workers_fall_back() {
        let (_dir, w, mut a, mut b) = host_workers();
        w.primary.fail(Some(ErrorKind::Timeout));
        for _ in 0..5 {
            acquire(&mut a, 0).unwrap();
            acquire(&mut b, 0).unwrap();
        }
        assert_eq!(w.local.written().fallback_switches, 1);
        assert_eq!(w.local.written().fallback_decisions, 10);
        assert_eq!(
            w.local.written().redis_errors,
            2,
            "the two that opened it; then none asked"
        );
        assert_eq!(w.primary.calls(), 2);
        assert_eq!(a.stats().unwrap().breaker, Some(BreakerState::Open));
    }

    #[test]
    fn with_the_breaker_open_decisions_are_fast_and_local() {
        let (_dir, w, mut a, _) = host_workers();
        w.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut a, 0).unwrap();
        acquire(&mut a, 0).unwrap();
        let calls = w.primary.calls();
        let d = acquire(&mut a, 0).unwrap();
        assert_eq!(d.verdict.source, Source::Fallback);
        assert_eq!(w.primary.calls(), calls);
        // After retry_ms the probe finds the primary back: the store decides again.
        w.primary.fail(None);
        w.time.set(2_000);
        assert_eq!(acquire(&mut a, 0).unwrap().verdict.source, Source::Store);
        assert_eq!(a.stats().unwrap().breaker, Some(BreakerState::Closed));
    }
}
