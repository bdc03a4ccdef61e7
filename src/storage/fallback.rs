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

use super::{Acquired, BucketView, Counters, Stats, Store, StoreError};
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
        let mut carried = *unwritten;
        carried.add(&self.held);
        carried.add(&extra);
        let local = match self.local() {
            None => return Err(e),
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
