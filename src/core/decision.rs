//! One decision, computed from what the store read: refill, check, take. The store writes back
//! the bucket this returns, inside the same transaction it read it in.

use super::bucket::{Bucket, Policy, MILLI};
use super::lease::Slots;

/// Why a call was allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Ok,
    /// Tokens short.
    Rate,
    /// Tokens suffice but every in-flight slot is taken.
    Inflight,
    /// Storage busy or full of live leases: no decision could be made.
    Unavailable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::Rate => "rate",
            Reason::Inflight => "inflight",
            Reason::Unavailable => "unavailable",
        }
    }
}

/// What a caller is told. Times in milliseconds from the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: Reason,
    /// Whole tokens left.
    pub remaining: u64,
    pub retry_after_ms: u64,
    pub reset_after_ms: u64,
    /// Until one more whole token is held (0 when full): the `t` of the `RateLimit` header.
    pub next_token_ms: u64,
}

/// What a retry of an "unavailable" decision should wait: an estimate, since nothing is known.
pub const UNAVAILABLE_RETRY_MS: u64 = 1_000;

impl Verdict {
    /// A decision that could not be made; allowed only when the operator chose to fail open.
    pub fn unavailable(fail_open: bool) -> Self {
        Self {
            allowed: fail_open,
            reason: Reason::Unavailable,
            remaining: 0,
            retry_after_ms: if fail_open { 0 } else { UNAVAILABLE_RETRY_MS },
            reset_after_ms: 0,
            next_token_ms: 0,
        }
    }
}

/// A request for `cost` tokens and, when `max_inflight > 0`, one of `max_inflight` slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub policy: Policy,
    pub cost: u64,
    pub max_inflight: u64,
}

/// The result: the bucket to store and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub bucket: Bucket,
    pub verdict: Verdict,
    pub clock_regressed: bool,
}

/// Refill `stored` (a missing bucket starts full), then take `cost` tokens if they are there
/// and a slot is free. A denial takes nothing.
pub fn decide(stored: Option<Bucket>, ask: &Ask, slots: Slots, now: i64) -> Decided {
    let p = &ask.policy;
    let refilled = stored
        .unwrap_or_else(|| Bucket::full(p, now))
        .refill(p, now);
    let mut bucket = refilled.bucket;
    let cost = ask.cost * MILLI;
    let reason = if bucket.tokens < cost {
        Reason::Rate
    } else if ask.max_inflight > 0 && slots.live >= ask.max_inflight {
        Reason::Inflight
    } else {
        Reason::Ok
    };
    let retry_after_ms = match reason {
        Reason::Ok | Reason::Unavailable => 0,
        Reason::Rate => bucket.wait_for(p, cost, now),
        Reason::Inflight => slots
            .earliest_expiry
            .map_or(0, |e| (e as i128 - now as i128).max(0) as u64),
    };
    if reason == Reason::Ok {
        bucket.tokens -= cost;
    }
    let verdict = Verdict {
        allowed: reason == Reason::Ok,
        reason,
        remaining: bucket.whole_tokens(),
        retry_after_ms,
        reset_after_ms: bucket.wait_until_full(p, now),
        next_token_ms: bucket.wait_for_next_token(p, now),
    };
    Decided {
        bucket,
        verdict,
        clock_regressed: refilled.clock_regressed,
    }
}

/// What a call of cost 1 would get now, without taking anything.
pub fn peek(stored: Option<Bucket>, policy: &Policy, now: i64) -> Verdict {
    let ask = Ask {
        policy: *policy,
        cost: 1,
        max_inflight: 0,
    };
    let mut v = decide(stored, &ask, Slots::default(), now).verdict;
    if v.allowed {
        // Report the tokens as they are, not as they would be after the take.
        let b = stored
            .unwrap_or_else(|| Bucket::full(policy, now))
            .refill(policy, now)
            .bucket;
        v.remaining = b.whole_tokens();
        v.reset_after_ms = b.wait_until_full(policy, now);
        v.next_token_ms = b.wait_for_next_token(policy, now);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(limit: u64, per_ms: u64, cost: u64, max_inflight: u64) -> Ask {
        Ask {
            policy: Policy::new(limit, per_ms).unwrap(),
            cost,
            max_inflight,
        }
    }

    #[test]
    fn first_call_takes_from_a_full_bucket() {
        let d = decide(None, &ask(5, 60_000, 1, 0), Slots::default(), 0);
        assert!(d.verdict.allowed);
        assert_eq!(d.verdict.reason, Reason::Ok);
        assert_eq!(d.verdict.remaining, 4);
        assert_eq!(d.bucket.tokens, 4_000);
        assert_eq!(d.verdict.reset_after_ms, 12_000);
        assert_eq!(d.verdict.next_token_ms, 12_000);
    }

    #[test]
    fn a_denial_takes_nothing_and_says_when_to_retry() {
        let stored = Bucket {
            tokens: 500,
            stamp: 0,
        };
        let d = decide(Some(stored), &ask(1, 1_000, 1, 0), Slots::default(), 0);
        assert!(!d.verdict.allowed);
        assert_eq!(d.verdict.reason, Reason::Rate);
        assert_eq!(d.bucket.tokens, 500);
        assert_eq!(d.verdict.retry_after_ms, 500);
    }

    #[test]
    fn cost_takes_several_tokens() {
        let d = decide(None, &ask(10, 1_000, 4, 0), Slots::default(), 0);
        assert_eq!(d.verdict.remaining, 6);
        let d = decide(
            Some(Bucket {
                tokens: 3_000,
                stamp: 0,
            }),
            &ask(10, 1_000, 4, 0),
            Slots::default(),
            0,
        );
        assert_eq!(d.verdict.reason, Reason::Rate);
        assert_eq!(d.verdict.retry_after_ms, 100);
    }

    #[test]
    fn full_slots_deny_with_inflight_when_tokens_suffice() {
        let slots = Slots {
            live: 2,
            earliest_expiry: Some(30_000),
        };
        let d = decide(None, &ask(5, 1_000, 1, 2), slots, 10_000);
        assert_eq!(d.verdict.reason, Reason::Inflight);
        assert_eq!(d.verdict.retry_after_ms, 20_000);
        assert_eq!(d.bucket.tokens, 5_000);
    }

    #[test]
    fn short_tokens_win_over_full_slots() {
        let slots = Slots {
            live: 2,
            earliest_expiry: Some(30_000),
        };
        let d = decide(
            Some(Bucket {
                tokens: 0,
                stamp: 0,
            }),
            &ask(5, 1_000, 1, 2),
            slots,
            0,
        );
        assert_eq!(d.verdict.reason, Reason::Rate);
    }

    #[test]
    fn zero_inflight_means_no_slot_limit() {
        let slots = Slots {
            live: 1_000,
            earliest_expiry: Some(1),
        };
        assert!(decide(None, &ask(5, 1_000, 1, 0), slots, 0).verdict.allowed);
    }

    #[test]
    fn peek_reports_without_taking() {
        let p = Policy::new(5, 60_000).unwrap();
        let v = peek(None, &p, 0);
        assert!(v.allowed);
        assert_eq!(v.remaining, 5);
        assert_eq!(v.reset_after_ms, 0);
        let v = peek(
            Some(Bucket {
                tokens: 0,
                stamp: 0,
            }),
            &p,
            0,
        );
        assert_eq!(v.reason, Reason::Rate);
        assert_eq!(v.retry_after_ms, 12_000);
    }

    #[test]
    fn unavailable_is_a_denial_unless_failing_open() {
        assert!(!Verdict::unavailable(false).allowed);
        assert!(Verdict::unavailable(true).allowed);
        assert_eq!(Verdict::unavailable(true).reason, Reason::Unavailable);
    }

    /// tests/vectors/decisions.tsv (also run through every store by the conformance suite),
    /// replayed on the pure core with the leases kept in a list.
    #[test]
    fn the_decision_vectors_hold() {
        use std::collections::HashMap;
        let mut state: HashMap<&str, (Option<Bucket>, Vec<i64>)> = HashMap::new();
        let mut steps = 0;
        for line in include_str!("../../tests/vectors/decisions.tsv").lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 13, "{line:?}");
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let now = 1_700_000_000_000 + f[5].parse::<i64>().unwrap();
            let a = Ask {
                policy: Policy::new(n(1), n(2)).unwrap(),
                cost: n(6),
                max_inflight: n(3),
            };
            let (stored, leases) = state.entry(f[0]).or_default();
            leases.retain(|&e| super::super::lease::is_live(e, now));
            let slots = if a.max_inflight > 0 {
                Slots {
                    live: leases.len() as u64,
                    earliest_expiry: leases.iter().min().copied(),
                }
            } else {
                Slots::default()
            };
            let d = decide(*stored, &a, slots, now);
            *stored = Some(d.bucket);
            if d.verdict.allowed && a.max_inflight > 0 {
                leases.push(super::super::lease::expiry(now, n(4)));
            }
            let v = d.verdict;
            let got = [
                u64::from(v.allowed).to_string(),
                v.reason.as_str().to_string(),
                v.remaining.to_string(),
                v.retry_after_ms.to_string(),
                v.reset_after_ms.to_string(),
                v.next_token_ms.to_string(),
            ];
            assert_eq!(got.as_slice(), &f[7..], "{line:?}");
            steps += 1;
        }
        assert!(steps >= 20, "only {steps} steps read");
    }
}
