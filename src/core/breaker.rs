//! The circuit breaker's rules, pure: the record every worker of a host shares (see
//! `crate::storage::breaker`, which keeps it in a small mmap'd file) and what a call, a
//! failure or a success does to it. No I/O; time is passed in.
//!
//! - **Closed**: calls go to the primary. `failures` failures within a *fixed* window of
//!   `window_ms` opened by the first of them open it (a failure after the window starts a new
//!   window; successes in between do not reset the count: the rule is "this many failures this
//!   quickly", not "this many in a row").
//! - **Open**: for `retry_ms`, every call is refused without asking the primary.
//! - **Half-open**: then exactly one decision at a time (the probe, [`Record::admit`]) is let
//!   through. Its success closes the breaker (and clears the count); its failure opens it for
//!   another `retry_ms`. A probe slot is held only until the deadline its taker was given (the
//!   probe timeout): a worker killed mid-probe blocks the others no longer than that. A call
//!   that may not probe ([`Record::admit_without_probe`]: the caller's rule is that only
//!   decisions probe, so that a probe proves what the breaker protects works) is refused, as
//!   while open, and leaves the slot to a decision.
//!
//! Reports of calls that were not the current probe (a call let through before the breaker
//! opened and ending late, a probe that outlived its deadline) change nothing once it is open.
//! The times are those of one clock shared by the host's processes; a stored time further
//! ahead than the rules could have put it (the clock stepped back, a rebooted host's monotonic
//! clock, a damaged record) is clamped, so the breaker is never held open longer than
//! `retry_ms` (nor a probe slot longer than the probe timeout) by it.

use super::config::BreakerConfig;

/// What `ratelimit_stats()` reports as `breaker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }

    /// The `ratelimit_breaker_state` gauge: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> u64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Open => 2,
        }
    }
}

/// What a call may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Closed: go to the primary.
    Pass,
    /// Half-open and this call holds the probe slot `id` (report its outcome with it).
    Probe(u64),
    /// Open, or half-open with another call's probe in flight or for a call that may not
    /// probe: do not ask the primary.
    Refuse,
}

impl Admit {
    pub fn probe(self) -> Option<u64> {
        match self {
            Admit::Probe(id) => Some(id),
            _ => None,
        }
    }
}

/// The shared record. All times in ms of the host's shared clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// Opened and not closed again by a probe since.
    pub open: bool,
    /// Failures in the current window (closed only).
    pub failures: u64,
    /// When the current window's first failure was.
    pub window_start: i64,
    /// While open: from when a probe is let through.
    pub open_until: i64,
    /// The probe in flight (0: none).
    pub probe: u64,
    /// After this, the probe in flight is taken as dead and its slot is free.
    pub probe_deadline: i64,
    /// The last probe id handed out.
    pub probes: u64,
    /// Times the breaker went from closed to open, ever (each by exactly one call).
    pub opened: u64,
}

impl Record {
    /// Undoes times further ahead than the rules could have put them (see the module doc).
    fn clamp(&mut self, cfg: &BreakerConfig, now: i64, probe_timeout_ms: u64) {
        self.open_until = self.open_until.min(now.saturating_add(cfg.retry_ms as i64));
        self.probe_deadline = self
            .probe_deadline
            .min(now.saturating_add(probe_timeout_ms as i64));
        if self.window_start > now {
            self.failures = 0;
        }
    }

    fn probe_in_flight(&self, now: i64) -> bool {
        self.probe != 0 && now < self.probe_deadline
    }

    /// The state at `now`.
    pub fn state(&self, cfg: &BreakerConfig, now: i64) -> BreakerState {
        if !self.open {
            BreakerState::Closed
        } else if now < self.open_until.min(now.saturating_add(cfg.retry_ms as i64)) {
            BreakerState::Open
        } else {
            BreakerState::HalfOpen
        }
    }

    /// Until when every call is refused without looking further (0: closed, calls pass): the
    /// word the shared file's fast path reads. Past it, a call must come and look.
    pub fn gate(&self, now: i64) -> i64 {
        if !self.open {
            0
        } else if self.probe_in_flight(now) {
            self.probe_deadline.max(self.open_until)
        } else {
            // Never 0 while open: a gate in the past sends calls to the slow path.
            self.open_until.max(1)
        }
    }

    /// A call that may probe arrives at `now`; a probe it is given is held until
    /// `now + probe_timeout_ms`.
    pub fn admit(&mut self, cfg: &BreakerConfig, now: i64, probe_timeout_ms: u64) -> Admit {
        self.clamp(cfg, now, probe_timeout_ms);
        if !self.open {
            return Admit::Pass;
        }
        if now < self.open_until || self.probe_in_flight(now) {
            return Admit::Refuse;
        }
        self.probes = self.probes.wrapping_add(1).max(1);
        self.probe = self.probes;
        self.probe_deadline = now.saturating_add(probe_timeout_ms.max(1) as i64);
        Admit::Probe(self.probe)
    }

    /// A call that may not probe arrives: it passes while closed and is refused while open or
    /// half-open, never taking the probe slot (nor freeing it).
    pub fn admit_without_probe(&self) -> Admit {
        if self.open {
            Admit::Refuse
        } else {
            Admit::Pass
        }
    }

    /// A call failed at `now` (`probe`: the slot it held). True when this failure opened the
    /// breaker (closed to open), which happens in exactly one call per opening.
    pub fn failed(&mut self, cfg: &BreakerConfig, now: i64, probe: Option<u64>) -> bool {
        if self.open {
            if probe.is_some_and(|p| p == self.probe) {
                self.open_until = now.saturating_add(cfg.retry_ms as i64);
                self.probe = 0;
            }
            return false;
        }
        let window_over = now.saturating_sub(self.window_start) >= cfg.window_ms as i64;
        if self.failures == 0 || window_over || now < self.window_start {
            self.window_start = now;
            self.failures = 0;
        }
        self.failures += 1;
        if self.failures < cfg.failures.max(1) {
            return false;
        }
        *self = Record {
            open: true,
            open_until: now.saturating_add(cfg.retry_ms as i64),
            opened: self.opened.wrapping_add(1),
            probes: self.probes,
            ..Record::default()
        };
        true
    }

    /// A call succeeded (`probe`: the slot it held): the current probe's success closes it.
    pub fn succeeded(&mut self, probe: Option<u64>) {
        if self.open && probe.is_some_and(|p| p != 0 && p == self.probe) {
            *self = Record {
                probes: self.probes,
                opened: self.opened,
                ..Record::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CFG: BreakerConfig = BreakerConfig {
        failures: 3,
        window_ms: 1_000,
        retry_ms: 500,
    };
    const PROBE_MS: u64 = 50;

    /// A record opened at `at` by three failures.
    fn opened_at(at: i64) -> Record {
        let mut r = Record::default();
        for _ in 0..3 {
            r.failed(&CFG, at, None);
        }
        assert!(r.open);
        r
    }

    #[test]
    fn a_fresh_record_is_closed_and_lets_calls_pass() {
        let mut r = Record::default();
        assert_eq!(r.state(&CFG, 0), BreakerState::Closed);
        assert_eq!(r.admit(&CFG, 0, PROBE_MS), Admit::Pass);
        assert_eq!(r.gate(0), 0);
    }

    #[test]
    fn failures_within_the_window_open_it_once() {
        let mut r = Record::default();
        assert!(!r.failed(&CFG, 0, None));
        assert!(!r.failed(&CFG, 400, None));
        assert!(
            r.failed(&CFG, 999, None),
            "the third within 1000 ms opens it"
        );
        assert_eq!(r.state(&CFG, 999), BreakerState::Open);
        assert!(
            !r.failed(&CFG, 999, None),
            "a late failure does not open it again"
        );
        assert_eq!(r.opened, 1);
    }

    #[test]
    fn failures_spread_over_more_than_the_window_do_not_open_it() {
        let mut r = Record::default();
        r.failed(&CFG, 0, None);
        r.failed(&CFG, 500, None);
        assert!(
            !r.failed(&CFG, 1_000, None),
            "the window began at 0 and ended at 1000"
        );
        assert_eq!(r.state(&CFG, 1_000), BreakerState::Closed);
        assert_eq!(r.failures, 1, "a new window began at 1000");
    }

    #[test]
    fn successes_between_failures_do_not_reset_the_count() {
        let mut r = Record::default();
        r.failed(&CFG, 0, None);
        r.succeeded(None);
        r.failed(&CFG, 1, None);
        r.succeeded(None);
        assert!(r.failed(&CFG, 2, None));
    }

    #[test]
    fn open_refuses_every_call_until_retry_ms() {
        let mut r = opened_at(0);
        for now in [0, 1, 250, 499] {
            assert_eq!(r.admit(&CFG, now, PROBE_MS), Admit::Refuse, "at {now}");
        }
        assert_eq!(r.gate(0), 500, "the fast path refuses until then");
    }

    #[test]
    fn after_retry_ms_exactly_one_probe_is_let_through() {
        let mut r = opened_at(0);
        assert_eq!(r.state(&CFG, 500), BreakerState::HalfOpen);
        let first = r.admit(&CFG, 500, PROBE_MS);
        assert!(matches!(first, Admit::Probe(_)));
        assert_eq!(r.admit(&CFG, 500, PROBE_MS), Admit::Refuse);
        assert_eq!(r.admit(&CFG, 549, PROBE_MS), Admit::Refuse);
        assert_eq!(
            r.gate(520),
            550,
            "refused on the fast path while the probe runs"
        );
    }

    #[test]
    fn a_call_that_may_not_probe_passes_while_closed() {
        let r = Record::default();
        assert_eq!(r.admit_without_probe(), Admit::Pass);
    }

    #[test]
    fn a_call_that_may_not_probe_is_refused_while_open_and_half_open_and_leaves_the_slot() {
        let mut r = opened_at(0);
        assert_eq!(r.admit_without_probe(), Admit::Refuse, "open");
        assert_eq!(r.state(&CFG, 500), BreakerState::HalfOpen);
        assert_eq!(r.admit_without_probe(), Admit::Refuse, "half-open");
        assert!(
            r.admit(&CFG, 500, PROBE_MS).probe().is_some(),
            "the slot is still the next decision's"
        );
        assert_eq!(r.admit_without_probe(), Admit::Refuse, "a probe in flight");
    }

    #[test]
    fn a_successful_probe_closes_it_and_clears_the_count() {
        let mut r = opened_at(0);
        let p = r.admit(&CFG, 500, PROBE_MS).probe();
        r.succeeded(p);
        assert_eq!(r.state(&CFG, 501), BreakerState::Closed);
        assert_eq!(r.admit(&CFG, 501, PROBE_MS), Admit::Pass);
        assert!(!r.failed(&CFG, 502, None) && !r.failed(&CFG, 503, None));
        assert_eq!(r.opened, 1);
    }

    #[test]
    fn a_failed_probe_reopens_it_for_another_retry_ms() {
        let mut r = opened_at(0);
        let p = r.admit(&CFG, 500, PROBE_MS).probe();
        assert!(!r.failed(&CFG, 530, p), "a reopening is not an opening");
        assert_eq!(r.state(&CFG, 1_029), BreakerState::Open);
        assert_eq!(r.admit(&CFG, 1_029, PROBE_MS), Admit::Refuse);
        assert!(r.admit(&CFG, 1_030, PROBE_MS).probe().is_some());
        assert_eq!(r.opened, 1);
    }

    #[test]
    fn a_dead_probe_frees_its_slot_at_its_deadline() {
        let mut r = opened_at(0);
        let dead = r.admit(&CFG, 500, PROBE_MS).probe();
        assert_eq!(r.admit(&CFG, 549, PROBE_MS), Admit::Refuse);
        let next = r.admit(&CFG, 550, PROBE_MS).probe();
        assert!(next.is_some() && next != dead);
    }

    #[test]
    fn a_stale_probe_report_changes_nothing() {
        let mut r = opened_at(0);
        let dead = r.admit(&CFG, 500, PROBE_MS).probe();
        let live = r.admit(&CFG, 550, PROBE_MS).probe();
        r.succeeded(dead);
        assert!(r.open, "only the current probe closes it");
        r.failed(&CFG, 560, dead);
        assert_eq!(
            r.probe,
            live.unwrap(),
            "nor does its failure take the live probe's slot"
        );
        r.succeeded(None);
        assert!(r.open, "nor does a call that held no probe");
    }

    #[test]
    fn a_clock_stepping_back_never_keeps_it_open_longer_than_retry_ms() {
        let mut r = opened_at(1_000_000);
        // The clock is now far behind what was stored (a reboot, a step back).
        assert_eq!(r.admit(&CFG, 10, PROBE_MS), Admit::Refuse);
        assert!(r.admit(&CFG, 510, PROBE_MS).probe().is_some());
    }

    proptest! {
        /// Whatever happens, a record is never open longer than `retry_ms` without a probe
        /// slot being offered, and never offers two live probe slots at once.
        #[test]
        fn at_most_one_live_probe_and_no_endless_open(
            steps in prop::collection::vec((0i64..300, 0u8..4), 1..200)
        ) {
            let mut r = Record::default();
            let mut now = 0i64;
            let mut live: Vec<(u64, i64)> = Vec::new();
            let mut refused_since: Option<i64> = None;
            for (dt, op) in steps {
                now += dt;
                live.retain(|&(_, deadline)| now < deadline);
                match op {
                    0 | 1 => match r.admit(&CFG, now, PROBE_MS) {
                        Admit::Probe(id) => {
                            prop_assert!(live.is_empty(), "a second live probe");
                            live.push((id, now + PROBE_MS as i64));
                            refused_since = None;
                        }
                        Admit::Refuse => {
                            let since = *refused_since.get_or_insert(now);
                            prop_assert!(
                                now - since <= (CFG.retry_ms + PROBE_MS) as i64,
                                "refused from {} to {}", since, now
                            );
                        }
                        Admit::Pass => refused_since = None,
                    },
                    2 => {
                        let p = live.pop().map(|(id, _)| id);
                        if r.failed(&CFG, now, p) {
                            refused_since = None;
                        }
                    }
                    _ => {
                        let p = live.pop().map(|(id, _)| id);
                        r.succeeded(p);
                    }
                }
                if !r.open {
                    refused_since = None;
                }
            }
        }
    }
}
