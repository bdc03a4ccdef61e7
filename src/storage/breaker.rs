//! [`Breaker`]: a [`Store`] in front of a primary (Redis) that stops asking it while the
//! host's breaker is open, so that an outage costs each call nothing instead of a timeout.
//!
//! Every call first reads the host's gate ([`HostBreaker::gate`], one atomic load): closed, it
//! goes to the primary; open, it fails at once with an `Unreachable` error ("primary store
//! breaker open"), which the limiter answers "unavailable" and a [`super::fallback::Fallback`]
//! above answers from the local store. Past the gate, the rules decide under the file's lock
//! whether this call is the host's one probe. Every failed call to the primary is counted as
//! `redis_errors`; all but the server's refusals of our settings (`Misconfigured`: they are the
//! operator's to fix, errors on every call) are fed to the rules; a probe's success closes the
//! breaker. A fault of the breaker file itself never stops
//! a decision: the call then goes to the primary as if closed.

use super::hostbreaker::HostBreaker;
use super::{
    Acquired, AcquiredAll, BucketView, Clock, Counters, ErrorKind, Stats, Store, StoreError,
};
use crate::core::breaker::{Admit, BreakerState};
use crate::core::bucket::Policy;
use crate::core::config::BreakerConfig;
use crate::core::decision::{Ask, Verdict};
use crate::core::keyswitch::{Fingerprint, KeyRecord};
use crate::core::lease::LeaseToken;
use crate::core::subject::BucketKey;
use crate::opslog::{Event, OpsLog};
use std::sync::Arc;

/// The error of a call the open breaker refused (names no subject, nor the primary's address).
pub const OPEN: &str = "primary store breaker open (redis not asked)";

pub struct Breaker {
    primary: Box<dyn Store>,
    shared: HostBreaker,
    cfg: BreakerConfig,
    probe_timeout_ms: u64,
    clock: Clock,
    log: Arc<OpsLog>,
    /// `redis_errors` not written yet: passed down with the next call, cleared on its success.
    held: Counters,
    /// Openings made by this process, not yet taken ([`Store::take_openings`]).
    openings: u64,
    /// A fallback above logs the switch an opening is: one line per switch, not two.
    opening_logged_above: bool,
}

impl Breaker {
    /// For a breaker under a [`super::fallback::Fallback`] with a local store, which logs the
    /// switch each opening is: the breaker then logs only its closing.
    pub fn opening_logged_above(mut self) -> Self {
        self.opening_logged_above = true;
        self
    }

    /// `shared`: the host's breaker file ([`HostBreaker::open`], lazily, on first use);
    /// `probe_timeout_ms`: how long a probe holds the host's probe slot before another call may
    /// probe (the primary's own timeout, so that a probe killed mid-call frees it then);
    /// `clock`: shared by the host's processes (the system clock, or CLOCK_MONOTONIC, which is
    /// host-wide).
    pub fn new(
        primary: Box<dyn Store>,
        shared: HostBreaker,
        cfg: BreakerConfig,
        probe_timeout_ms: u64,
        clock: Clock,
        log: Arc<OpsLog>,
    ) -> Self {
        Self {
            primary,
            shared,
            cfg,
            probe_timeout_ms,
            clock,
            log,
            held: Counters::default(),
            openings: 0,
            opening_logged_above: false,
        }
    }

    /// Whether this call may ask the primary, and as the probe or not.
    fn admit(&mut self) -> Admit {
        self.renew_shared();
        let now = (self.clock)();
        let gate = self.shared.gate();
        if gate == 0 {
            return Admit::Pass;
        }
        // A gate further ahead than any rule puts it is mended on the locked path.
        let bound = now.saturating_add(self.cfg.retry_ms.max(self.probe_timeout_ms) as i64);
        if now < gate && gate <= bound {
            return Admit::Refuse;
        }
        let (cfg, timeout) = (self.cfg, self.probe_timeout_ms);
        self.shared
            .transition(now, |r| r.admit(&cfg, now, timeout))
            .unwrap_or(Admit::Pass)
    }

    /// Shares the host's breaker again after its file was truncated under this process (one
    /// log line, see `OpsLog`). Until the file can be opened anew, the call decides with what
    /// the poisoned mapping holds: zeros, a closed breaker (the primary's answer decides).
    fn renew_shared(&mut self) {
        let _ = self.shared.renew();
        if self.shared.take_truncated() {
            let path = self.shared.path().display().to_string();
            self.log.note(Event::StateFileDamaged, &path);
        }
    }

    /// Runs `f` on the primary through the breaker, with `unwritten` and the held counts.
    fn call<T>(
        &mut self,
        unwritten: &Counters,
        f: impl FnOnce(&mut dyn Store, &Counters) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let admit = self.admit();
        if admit == Admit::Refuse {
            return Err(StoreError::new(ErrorKind::Unreachable, OPEN));
        }
        let mut carried = *unwritten;
        carried.add(&self.held);
        let result = f(self.primary.as_mut(), &carried);
        let now = (self.clock)();
        let cfg = self.cfg;
        // A server that answered, even to refuse our settings (a wrong password, a missing
        // permission, a database that does not exist), is no outage: a probe that met it closes
        // the breaker, and such an error never opens it, so that what the operator must fix
        // stays an error on every call instead of turning into "unavailable" decisions.
        let answered = match &result {
            Ok(_) => true,
            Err(e) => e.kind() == ErrorKind::Misconfigured,
        };
        if answered {
            if let Some(p) = admit.probe() {
                let closed = self.shared.transition(now, |r| {
                    r.succeeded(Some(p));
                    !r.open
                });
                if closed.unwrap_or(false) {
                    self.log.note(Event::BreakerClosed, "redis");
                }
            }
        }
        match &result {
            Ok(_) => self.held = Counters::default(),
            Err(_) if answered => self.held.redis_errors += 1,
            Err(e) => {
                self.held.redis_errors += 1;
                let opened = self
                    .shared
                    .transition(now, |r| r.failed(&cfg, now, admit.probe()));
                if opened.unwrap_or(false) {
                    self.openings += 1;
                    if !self.opening_logged_above {
                        self.log.note(Event::BreakerOpened, e.what());
                    }
                }
            }
        }
        result
    }
}

impl Store for Breaker {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<Acquired, StoreError> {
        self.call(unwritten, |p, c| p.acquire(key, ask, lease_ttl_ms, c))
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<AcquiredAll, StoreError> {
        self.call(unwritten, |p, c| p.acquire_all(keys, asks, lease_ttl_ms, c))
    }

    fn peek(&mut self, key: &BucketKey, policy: &Policy) -> Result<Verdict, StoreError> {
        self.call(&Counters::default(), |p, _| p.peek(key, policy))
    }

    fn release(&mut self, leases: &[LeaseToken], unwritten: &Counters) -> Result<u64, StoreError> {
        self.call(unwritten, |p, c| p.release(leases, c))
    }

    fn reset(&mut self, key: &BucketKey, unwritten: &Counters) -> Result<bool, StoreError> {
        self.call(unwritten, |p, c| p.reset(key, c))
    }

    /// The primary's stats with the held counts and the breaker's state.
    fn stats(&mut self) -> Result<Stats, StoreError> {
        let mut s = self.call(&Counters::default(), |p, _| p.stats())?;
        s.counters.add(&self.held);
        s.breaker = self.breaker();
        Ok(s)
    }

    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError> {
        self.call(&Counters::default(), |p, _| p.top(n))
    }

    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        self.call(&Counters::default(), |p, _| p.add_denials(denials))
    }

    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        self.call(&Counters::default(), |p, _| p.key_record())
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        self.call(&Counters::default(), |p, _| p.record_key(new, expected))
    }

    fn tick(&mut self) {
        self.renew_shared();
        if self.shared.gate() == 0 {
            self.primary.tick();
        }
    }

    fn flush(&mut self, unwritten: &Counters) -> Result<(), StoreError> {
        self.call(unwritten, |p, c| p.flush(c))
    }

    fn breaker(&mut self) -> Option<BreakerState> {
        let now = (self.clock)();
        let cfg = self.cfg;
        Some(
            self.shared
                .record(now)
                .map_or(BreakerState::Closed, |r| r.state(&cfg, now)),
        )
    }

    fn take_openings(&mut self) -> u64 {
        std::mem::take(&mut self.openings)
    }

    fn take_unwritten(&mut self) -> Counters {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fake::{key, Fake, Manual};
    use std::os::unix::fs::PermissionsExt;

    const CFG: BreakerConfig = BreakerConfig {
        failures: 3,
        window_ms: 10_000,
        retry_ms: 1_000,
    };

    struct Host {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        time: Manual,
    }

    fn host() -> Host {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().join("db.sqlite.breaker");
        Host {
            _dir: dir,
            path,
            time: Manual::at(1_000),
        }
    }

    /// A worker of `h`: its breaker around its own fake primary.
    fn worker(h: &Host) -> (Breaker, Fake) {
        let fake = Fake::new(h.time.clock());
        let b = Breaker::new(
            fake.boxed(),
            HostBreaker::open(&h.path).unwrap(),
            CFG,
            50,
            h.time.clock(),
            OpsLog::none(),
        );
        (b, fake)
    }

    fn ask() -> Ask {
        Ask::new(Policy::new(5, 1_000).unwrap(), 1, 0)
    }

    fn acquire(b: &mut Breaker) -> Result<Acquired, StoreError> {
        b.acquire(&key(1), &ask(), 60_000, &Counters::default())
    }

    /// Fails `b`'s primary three times: the host's breaker opens.
    fn open_it(b: &mut Breaker, fake: &Fake) {
        fake.fail(Some(ErrorKind::Timeout));
        for _ in 0..3 {
            assert_eq!(acquire(b).unwrap_err().kind(), ErrorKind::Timeout);
        }
    }

    #[test]
    fn a_call_whose_breaker_file_was_truncated_asks_the_primary_and_the_next_opens_it_anew() {
        let h = host();
        let (mut a, fa) = worker(&h);
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = {
            let lines = Arc::clone(&lines);
            OpsLog::new(
                move |l| lines.lock().unwrap().push(l.to_string()),
                h.time.clock(),
            )
        };
        let fb = Fake::new(h.time.clock());
        let hb = HostBreaker::open(&h.path).unwrap();
        let mut b = Breaker::new(fb.boxed(), hb, CFG, 50, h.time.clock(), log);
        open_it(&mut a, &fa);
        assert_eq!(acquire(&mut b).unwrap_err().what(), OPEN);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&h.path)
            .unwrap()
            .set_len(0)
            .unwrap();
        // The gate reads zeros (a fault, on private memory): closed; the primary decides.
        assert!(acquire(&mut b).unwrap().verdict.allowed);
        assert_eq!(fb.calls(), 1);
        assert!(lines.lock().unwrap().is_empty());
        // The next call opens the file anew (extended, rebuilt closed) and says so once.
        assert!(acquire(&mut b).unwrap().verdict.allowed);
        assert_eq!(
            std::fs::metadata(&h.path).unwrap().len(),
            crate::storage::hostbreaker::LEN as u64
        );
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("truncated") && lines[0].contains(h.path.to_str().unwrap()),
            "{lines:?}"
        );
    }

    #[test]
    fn closed_it_passes_calls_and_their_answers_through() {
        let h = host();
        let (mut b, fake) = worker(&h);
        assert!(acquire(&mut b).unwrap().verdict.allowed);
        assert_eq!(fake.calls(), 1);
        assert_eq!(b.breaker(), Some(BreakerState::Closed));
    }

    #[test]
    fn open_it_gates_compound_calls_too() {
        let h = host();
        let (mut b, fake) = worker(&h);
        open_it(&mut b, &fake);
        let calls = fake.calls();
        let e = b
            .acquire_all(
                &[key(1), key(2)],
                &[ask(), ask()],
                60_000,
                &Counters::default(),
            )
            .unwrap_err();
        assert_eq!((e.kind(), e.what()), (ErrorKind::Unreachable, OPEN));
        assert_eq!(fake.calls(), calls, "the primary was not asked");
    }

    #[test]
    fn open_it_fails_fast_without_calling_the_primary() {
        let h = host();
        let (mut b, fake) = worker(&h);
        open_it(&mut b, &fake);
        let calls = fake.calls();
        for _ in 0..100 {
            let e = acquire(&mut b).unwrap_err();
            assert_eq!((e.kind(), e.what()), (ErrorKind::Unreachable, OPEN));
        }
        assert!(b.peek(&key(1), &ask().policy).is_err());
        assert_eq!(fake.calls(), calls, "the primary was not asked");
        assert_eq!(b.breaker(), Some(BreakerState::Open));
    }

    #[test]
    fn one_workers_failures_open_it_for_every_worker_of_the_host() {
        let h = host();
        let (mut a, fa) = worker(&h);
        let (mut b, fb) = worker(&h);
        open_it(&mut a, &fa);
        assert!(acquire(&mut b).is_err());
        assert_eq!(fb.calls(), 0, "b never paid for the outage");
    }

    #[test]
    fn an_opening_is_taken_once_by_the_worker_that_made_it() {
        let h = host();
        let (mut a, fa) = worker(&h);
        let (mut b, fb) = worker(&h);
        fa.fail(Some(ErrorKind::Timeout));
        fb.fail(Some(ErrorKind::Timeout));
        acquire(&mut a).unwrap_err();
        acquire(&mut b).unwrap_err();
        acquire(&mut a).unwrap_err(); // the third of the host's: a opens it
        acquire(&mut b).unwrap_err(); // refused
        assert_eq!((a.take_openings(), b.take_openings()), (1, 0));
        assert_eq!(a.take_openings(), 0, "taken once");
    }

    #[test]
    fn after_retry_ms_one_probe_goes_through_and_its_success_closes_it() {
        let h = host();
        let (mut a, fa) = worker(&h);
        let (mut b, fb) = worker(&h);
        open_it(&mut a, &fa);
        fa.fail(None);
        h.time.set(1_000 + 1_000);
        assert_eq!(a.breaker(), Some(BreakerState::HalfOpen));
        // a holds the probe while b comes: b is refused (simulated by taking the slot first).
        let slot = a.admit();
        assert!(slot.probe().is_some());
        assert!(acquire(&mut b).is_err());
        assert_eq!(fb.calls(), 0);
        // The slot's holder died; its deadline (50 ms) passes; b probes and succeeds.
        h.time.set(2_050);
        assert!(acquire(&mut b).unwrap().verdict.allowed);
        assert_eq!(b.breaker(), Some(BreakerState::Closed));
        assert!(acquire(&mut a).is_ok());
    }

    #[test]
    fn a_failed_probe_reopens_it() {
        let h = host();
        let (mut a, fa) = worker(&h);
        open_it(&mut a, &fa);
        h.time.set(2_000);
        let calls = fa.calls();
        assert_eq!(acquire(&mut a).unwrap_err().kind(), ErrorKind::Timeout);
        assert_eq!(fa.calls(), calls + 1, "the probe asked the primary");
        assert_eq!(a.breaker(), Some(BreakerState::Open));
        h.time.set(2_999);
        assert_eq!(acquire(&mut a).unwrap_err().what(), OPEN);
        assert_eq!(fa.calls(), calls + 1);
    }

    #[test]
    fn every_failed_call_is_a_redis_error_of_any_kind_and_refusals_are_not() {
        let h = host();
        let (mut a, fa) = worker(&h);
        for kind in [
            ErrorKind::Misconfigured,
            ErrorKind::Io,
            ErrorKind::Unreachable,
            ErrorKind::Timeout,
        ] {
            fa.fail(Some(kind));
            acquire(&mut a).unwrap_err();
        }
        acquire(&mut a).unwrap_err(); // refused: open
        assert_eq!(a.take_unwritten().redis_errors, 4);
        assert_eq!(a.take_unwritten().redis_errors, 0, "handed over once");
    }

    #[test]
    fn a_server_refusing_our_settings_never_opens_the_breaker() {
        let h = host();
        let (mut a, fa) = worker(&h);
        fa.fail(Some(ErrorKind::Misconfigured));
        for _ in 0..20 {
            assert_eq!(
                acquire(&mut a).unwrap_err().kind(),
                ErrorKind::Misconfigured
            );
        }
        assert_eq!(a.breaker(), Some(BreakerState::Closed));
        assert_eq!(a.take_unwritten().redis_errors, 20);
    }

    #[test]
    fn a_probe_meeting_a_server_that_refuses_our_settings_closes_the_breaker() {
        let h = host();
        let (mut a, fa) = worker(&h);
        open_it(&mut a, &fa);
        h.time.set(2_000);
        fa.fail(Some(ErrorKind::Misconfigured));
        assert_eq!(
            acquire(&mut a).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
        assert_eq!(a.breaker(), Some(BreakerState::Closed));
        // Every call then asks the server, and gets the error the operator must fix.
        assert_eq!(
            acquire(&mut a).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
    }

    #[test]
    fn held_redis_errors_are_written_by_the_next_successful_call_once() {
        let h = host();
        let (mut a, fa) = worker(&h);
        fa.fail(Some(ErrorKind::Timeout));
        acquire(&mut a).unwrap_err();
        assert_eq!(a.stats().unwrap_err().kind(), ErrorKind::Timeout);
        fa.fail(None);
        acquire(&mut a).unwrap();
        acquire(&mut a).unwrap();
        assert_eq!(fa.written().redis_errors, 2);
        assert_eq!(a.stats().unwrap().counters.redis_errors, 2);
    }

    #[test]
    fn stats_report_the_breaker_state() {
        let h = host();
        let (mut a, _) = worker(&h);
        assert_eq!(a.stats().unwrap().breaker, Some(BreakerState::Closed));
    }
}
