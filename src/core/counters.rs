//! The host-wide (or site-wide) counters of `ratelimit_stats()`. Every backend maps a decision's
//! reason to a counter the same way, through [`Counters::record`].

use super::breaker::BreakerState;
use super::decision::{Reason, Verdict};

/// Counts since the store was created, summed over all workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub allowed: u64,
    pub denied_rate: u64,
    pub denied_inflight: u64,
    /// Retries denied while the first admission of their request id still holds its lease.
    pub denied_in_progress: u64,
    pub unavailable: u64,
    pub leases_expired: u64,
    pub evicted: u64,
    pub clock_regressions: u64,
    /// Buckets moved from the previous key's pseudonym to the current one (key rotation).
    pub keys_migrated: u64,
    /// Times a process found the database file removed or replaced, and opened the path anew.
    pub reopened: u64,
    /// Storage faults met while deciding (disk full, I/O error, read-only, corrupt): each was
    /// an "unavailable" decision.
    pub storage_errors: u64,
    /// Denials of shadow scopes (`ratelimit.dry_run`), answered `allowed`; each is counted
    /// under its real reason too.
    pub dry_run_denied: u64,
    /// Replays: calls answered as a repeat of an earlier admission of the same request id and
    /// terms, taking nothing (see `core::request`).
    pub retries: u64,
    /// Failed calls to the primary store behind a breaker (Redis), of any kind, including
    /// the failed probes; calls the open breaker refused are not calls and are not counted.
    pub redis_errors: u64,
    /// Times this host switched from the primary store to its local fallback (the host's
    /// breaker going from closed to open): once per host and opening, not per worker.
    pub fallback_switches: u64,
    /// Decisions made by the local fallback while the primary was unavailable (each counted
    /// under its reason too).
    pub fallback_decisions: u64,
}

impl Counters {
    /// No counts (as `default()`, usable in a `const`).
    pub const ZERO: Counters = Counters {
        allowed: 0,
        denied_rate: 0,
        denied_inflight: 0,
        denied_in_progress: 0,
        unavailable: 0,
        leases_expired: 0,
        evicted: 0,
        clock_regressions: 0,
        keys_migrated: 0,
        reopened: 0,
        storage_errors: 0,
        dry_run_denied: 0,
        retries: 0,
        redis_errors: 0,
        fallback_switches: 0,
        fallback_decisions: 0,
    };

    /// Counts one decision under its reason.
    pub fn record(&mut self, reason: Reason) {
        match reason {
            Reason::Ok => self.allowed += 1,
            Reason::Rate => self.denied_rate += 1,
            Reason::Inflight => self.denied_inflight += 1,
            Reason::Unavailable => self.unavailable += 1,
            Reason::InProgress => self.denied_in_progress += 1,
        }
    }

    /// Counts one decision: under its reason, and as a shadow denial when it was one.
    pub fn record_verdict(&mut self, v: &Verdict) {
        self.record(v.reason);
        self.dry_run_denied += u64::from(v.dry_run);
    }

    pub fn add(&mut self, o: &Counters) {
        self.allowed += o.allowed;
        self.denied_rate += o.denied_rate;
        self.denied_inflight += o.denied_inflight;
        self.denied_in_progress += o.denied_in_progress;
        self.unavailable += o.unavailable;
        self.leases_expired += o.leases_expired;
        self.evicted += o.evicted;
        self.clock_regressions += o.clock_regressions;
        self.keys_migrated += o.keys_migrated;
        self.reopened += o.reopened;
        self.storage_errors += o.storage_errors;
        self.dry_run_denied += o.dry_run_denied;
        self.retries += o.retries;
        self.redis_errors += o.redis_errors;
        self.fallback_switches += o.fallback_switches;
        self.fallback_decisions += o.fallback_decisions;
    }

    pub fn is_zero(&self) -> bool {
        *self == Counters::default()
    }

    /// The counter of that name (as [`Counters::named`] lists it), for a store that keeps them
    /// by name.
    pub fn by_name(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "allowed" => &mut self.allowed,
            "denied_rate" => &mut self.denied_rate,
            "denied_inflight" => &mut self.denied_inflight,
            "denied_in_progress" => &mut self.denied_in_progress,
            "unavailable" => &mut self.unavailable,
            "leases_expired" => &mut self.leases_expired,
            "evicted" => &mut self.evicted,
            "clock_regressions" => &mut self.clock_regressions,
            "keys_migrated" => &mut self.keys_migrated,
            "reopened" => &mut self.reopened,
            "storage_errors" => &mut self.storage_errors,
            "dry_run_denied" => &mut self.dry_run_denied,
            "retries" => &mut self.retries,
            "redis_errors" => &mut self.redis_errors,
            "fallback_switches" => &mut self.fallback_switches,
            "fallback_decisions" => &mut self.fallback_decisions,
            _ => return None,
        })
    }

    /// Named pairs, in the order `ratelimit_stats()` lists them.
    pub fn named(&self) -> [(&'static str, u64); 16] {
        [
            ("allowed", self.allowed),
            ("denied_rate", self.denied_rate),
            ("denied_inflight", self.denied_inflight),
            ("denied_in_progress", self.denied_in_progress),
            ("unavailable", self.unavailable),
            ("leases_expired", self.leases_expired),
            ("evicted", self.evicted),
            ("clock_regressions", self.clock_regressions),
            ("keys_migrated", self.keys_migrated),
            ("reopened", self.reopened),
            ("storage_errors", self.storage_errors),
            ("dry_run_denied", self.dry_run_denied),
            ("retries", self.retries),
            ("redis_errors", self.redis_errors),
            ("fallback_switches", self.fallback_switches),
            ("fallback_decisions", self.fallback_decisions),
        ]
    }
}

/// The counters and gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub counters: Counters,
    /// Buckets stored.
    pub entries: u64,
    /// Leases not yet expired nor released.
    pub live_leases: u64,
    /// The state of the host's breaker in front of the primary store; None for a store
    /// without one (`ratelimit_stats()` then says "closed").
    pub breaker: Option<BreakerState>,
    /// The store could not be read (a transient fault, Redis down): the counts are only what
    /// this host (its local fallback's file) and this process know, and the gauges may be 0.
    pub partial: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_counter_is_found_by_its_name() {
        let mut c = Counters::default();
        for (i, (name, _)) in Counters::default().named().iter().enumerate() {
            *c.by_name(name).expect("named") = i as u64 + 1;
        }
        let values: Vec<u64> = c.named().iter().map(|(_, v)| *v).collect();
        let expected: Vec<u64> = (1..=values.len() as u64).collect();
        assert_eq!(values, expected);
        assert!(c.by_name("nope").is_none());
    }

    #[test]
    fn each_reason_has_its_own_counter() {
        let mut c = Counters::default();
        for r in [
            Reason::Ok,
            Reason::Ok,
            Reason::Rate,
            Reason::Inflight,
            Reason::Unavailable,
            Reason::InProgress,
        ] {
            c.record(r);
        }
        assert_eq!(
            (
                c.allowed,
                c.denied_rate,
                c.denied_inflight,
                c.unavailable,
                c.denied_in_progress
            ),
            (2, 1, 1, 1, 1)
        );
        assert_eq!(
            (c.leases_expired, c.evicted, c.clock_regressions),
            (0, 0, 0)
        );
    }

    #[test]
    fn add_sums_every_counter() {
        let one = Counters {
            allowed: 1,
            denied_rate: 2,
            denied_inflight: 3,
            denied_in_progress: 4,
            unavailable: 5,
            leases_expired: 6,
            evicted: 7,
            clock_regressions: 8,
            keys_migrated: 9,
            reopened: 10,
            storage_errors: 11,
            dry_run_denied: 12,
            retries: 13,
            redis_errors: 14,
            fallback_switches: 15,
            fallback_decisions: 16,
        };
        let mut sum = one;
        sum.add(&one);
        assert_eq!(
            sum.named().map(|(_, v)| v),
            [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32]
        );
        assert!(!sum.is_zero() && Counters::default().is_zero());
    }
}
