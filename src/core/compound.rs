//! Compound limits, all or nothing (`ratelimit_acquire_all()`): several buckets of one subject
//! decided together, inside one atomic step of the store. Every limit is refilled and checked
//! before any is charged; a denial by any one charges none (a client held back by its daily
//! limit must not also spend its per-second tokens). Pure: the store reads the buckets,
//! calls [`decide_all`], and writes back what it returns.

use super::bucket::Bucket;
use super::decision::{self, Ask, Verdict};
use super::lease::Slots;

/// Most limits in one call: each is a bucket read and written in the same atomic step.
pub const MAX_LIMITS: usize = 8;

/// The outcome of [`decide_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedAll {
    /// The bucket to store for each ask, in order: charged when allowed, refilled only when not.
    pub buckets: Vec<Bucket>,
    /// The combined answer: the verdict of limit `reported`.
    pub verdict: Verdict,
    /// Each limit's own view, for the headers: after the charge when the call was admitted,
    /// as it stands (nothing taken) when it was not.
    pub each: Vec<Verdict>,
    /// Which limit the combined verdict is: when denied, the denying one with the longest wait;
    /// when admitted, the one with the fewest tokens left (the first on ties).
    pub reported: usize,
    pub clock_regressed: bool,
}

/// The limit a compound answer reports, by the rule of [`DecidedAll::reported`], from each
/// limit's verdict: real denials first (a shadow one must not set the client's wait), then
/// shadow denials, then the admissions. Shared with the Redis script, which applies the same
/// rule to decide which bucket counts the decision.
pub fn tightest(each: &[Verdict]) -> usize {
    let pick = |f: &dyn Fn(&Verdict) -> bool| {
        each.iter()
            .enumerate()
            .filter(|(_, v)| f(v))
            // max_by_key keeps the last maximum: reverse so that the first one wins.
            .rev()
            .max_by_key(|(_, v)| v.retry_after_ms)
            .map(|(i, _)| i)
    };
    pick(&|v| !v.took() && !v.dry_run)
        .or_else(|| pick(&|v| v.dry_run))
        .unwrap_or_else(|| {
            // min_by_key keeps the first minimum.
            each.iter()
                .enumerate()
                .min_by_key(|(_, v)| v.remaining)
                .map_or(0, |(i, _)| i)
        })
}

/// Decides `asks[i]` on `stored[i]`, together. `slots` are those of the first ask's bucket (the
/// only one that may hold a lease); the others are asked with no slot limit.
///
/// # Panics
/// When `stored` and `asks` differ in length or are empty (the caller's contract).
pub fn decide_all(stored: &[Option<Bucket>], asks: &[Ask], slots: Slots, now: i64) -> DecidedAll {
    assert!(!asks.is_empty() && stored.len() == asks.len());
    let decided: Vec<decision::Decided> = stored
        .iter()
        .zip(asks)
        .enumerate()
        .map(|(i, (s, a))| {
            let mut a = *a;
            if i > 0 {
                a.max_inflight = 0;
            }
            // A compound call books nothing ahead: all or nothing, now.
            a.max_wait_ms = None;
            let slots = if i == 0 { slots } else { Slots::default() };
            decision::decide(*s, &a, slots, now)
        })
        .collect();
    let clock_regressed = decided.iter().any(|d| d.clock_regressed);
    let all_took = decided.iter().all(|d| d.verdict.took());
    let mut each: Vec<Verdict> = decided.iter().map(|d| d.verdict).collect();
    let buckets: Vec<Bucket> = if all_took {
        decided.iter().map(|d| d.bucket).collect()
    } else {
        // Nothing is charged: a limit that would have admitted keeps its state as refilled
        // (its cost given back), and is reported as it stands (what a peek would say).
        decided
            .iter()
            .zip(stored)
            .zip(asks)
            .zip(each.iter_mut())
            .map(|(((d, s), a), v)| {
                if !d.verdict.took() {
                    return d.bucket;
                }
                let p = &a.policy;
                let b = s
                    .unwrap_or_else(|| Bucket::full(p, now))
                    .refill(p, now)
                    .bucket;
                decision::standing(v, &b, p, now);
                b
            })
            .collect()
    };
    // The tokens owed by earlier reservations are not reported by a compound call (its Lua
    // script's and native command's replies have no field for them): 0 on every backend.
    for v in &mut each {
        v.reserved = 0;
    }
    let reported = tightest(&each);
    let verdict = each[reported];
    debug_assert!(verdict.took() == all_took);
    DecidedAll {
        buckets,
        verdict,
        each,
        reported,
        clock_regressed,
    }
}

/// The answer of a compound call with a request id that the store judged a replay or in
/// progress (see `core::request`), from each limit's bucket as it stands (`peeked`, each a
/// [`decision::peek`]): nothing is charged. A replay reports the tightest limit (as an
/// admission would), answered as a replay; in progress reports the first limit, whose bucket
/// holds the lease, denied until `until` (allowed when `dry_run`, a shadow scope). None for a
/// call to decide afresh.
pub fn remembered(
    peeked: &[Verdict],
    judgement: super::request::Judgement,
    now: i64,
    dry_run: bool,
) -> Option<(usize, Verdict)> {
    use super::request::Judgement;
    let answer = match judgement {
        Judgement::Fresh => None,
        Judgement::Replay => {
            let reported = tightest(peeked);
            Some((reported, decision::as_replay(peeked[reported])))
        }
        Judgement::InProgress { until } => {
            Some((0, decision::as_in_progress(peeked[0], until, now, dry_run)))
        }
    };
    // As for every compound answer (see `decide_all`).
    answer.map(|(i, v)| (i, Verdict { reserved: 0, ..v }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::bucket::Policy;
    use crate::core::decision::Reason;
    use proptest::prelude::*;

    fn ask(limit: u64, per_ms: u64) -> Ask {
        Ask::new(Policy::new(limit, per_ms).unwrap(), 1, 0)
    }

    fn empty() -> Option<Bucket> {
        Some(Bucket::tokens_at(0, 0))
    }

    #[test]
    fn an_admission_charges_every_limit() {
        let d = decide_all(
            &[None, None],
            &[ask(5, 1_000), ask(100, 60_000)],
            Slots::default(),
            0,
        );
        assert!(d.verdict.allowed);
        assert_eq!(
            d.buckets.iter().map(|b| b.tokens).collect::<Vec<_>>(),
            [4_000, 99_000]
        );
    }

    #[test]
    fn a_denial_by_the_second_limit_charges_neither() {
        let d = decide_all(
            &[None, empty()],
            &[ask(5, 1_000), ask(1, 60_000)],
            Slots::default(),
            0,
        );
        assert_eq!((d.verdict.allowed, d.verdict.reason), (false, Reason::Rate));
        assert_eq!(
            d.buckets[0].tokens, 5_000,
            "the first limit gave its token back"
        );
        assert_eq!(d.buckets[1].tokens, 0);
        assert_eq!(d.each[0].remaining, 5, "reported as it stands");
    }

    #[test]
    fn a_remembered_answer_charges_nothing_and_reports_by_its_kind() {
        use crate::core::request::Judgement;
        let p = [ask(10, 1_000).policy, ask(1, 60_000).policy];
        let peeked = [
            decision::peek(None, &p[0], 0),
            decision::peek(empty(), &p[1], 0),
        ];
        assert_eq!(remembered(&peeked, Judgement::Fresh, 0, false), None);
        let (reported, v) = remembered(&peeked, Judgement::Replay, 0, false).unwrap();
        assert_eq!(reported, 1, "the tightest limit, as it stands");
        assert_eq!(
            (v.allowed, v.reason, v.replay, v.remaining, v.retry_after_ms),
            (true, Reason::Ok, true, 0, 0)
        );
        let (reported, v) =
            remembered(&peeked, Judgement::InProgress { until: 700 }, 200, false).unwrap();
        assert_eq!(reported, 0, "the first limit holds the lease");
        assert_eq!(
            (v.allowed, v.reason, v.retry_after_ms, v.remaining),
            (false, Reason::InProgress, 500, 10)
        );
    }

    #[test]
    fn a_denial_reports_the_denying_limit_with_the_longest_wait() {
        let asks = [ask(10, 1_000), ask(1, 1_000), ask(1, 60_000)];
        let d = decide_all(&[None, empty(), empty()], &asks, Slots::default(), 0);
        assert_eq!(d.reported, 2);
        assert_eq!(d.verdict.retry_after_ms, 60_000);
    }

    #[test]
    fn an_admission_reports_the_limit_with_the_fewest_tokens_left() {
        let asks = [ask(10, 1_000), ask(3, 1_000), ask(3, 60_000)];
        let d = decide_all(&[None, None, None], &asks, Slots::default(), 0);
        assert_eq!(
            (d.reported, d.verdict.remaining),
            (1, 2),
            "the first on ties"
        );
    }

    #[test]
    fn slots_apply_to_the_first_limit_only() {
        let full = Slots {
            live: 1,
            earliest_expiry: Some(5_000),
        };
        let mut first = ask(5, 1_000);
        first.max_inflight = 1;
        let d = decide_all(&[None, None], &[first, ask(5, 1_000)], full, 0);
        assert_eq!((d.reported, d.verdict.reason), (0, Reason::Inflight));
        let mut second = ask(5, 1_000);
        second.max_inflight = 1;
        let d = decide_all(&[None, None], &[ask(5, 1_000), second], full, 0);
        assert!(d.verdict.took());
    }

    #[test]
    fn a_shadow_denial_alone_is_answered_allowed_and_charges_nothing() {
        let mut shadow = ask(1, 60_000);
        shadow.dry_run = true;
        let d = decide_all(
            &[None, empty()],
            &[ask(5, 1_000), shadow],
            Slots::default(),
            0,
        );
        assert_eq!(
            (
                d.verdict.allowed,
                d.verdict.dry_run,
                d.verdict.reason,
                d.reported
            ),
            (true, true, Reason::Rate, 1)
        );
        assert_eq!(d.buckets[0].tokens, 5_000);
    }

    #[test]
    fn a_real_denial_wins_over_a_longer_shadow_one() {
        let mut shadow = ask(1, 60_000);
        shadow.dry_run = true;
        let d = decide_all(
            &[empty(), empty()],
            &[ask(1, 1_000), shadow],
            Slots::default(),
            0,
        );
        assert_eq!(
            (d.verdict.allowed, d.verdict.dry_run, d.reported),
            (false, false, 0)
        );
        assert_eq!(d.verdict.retry_after_ms, 1_000);
    }

    fn arb_case() -> impl Strategy<Value = (Vec<(Option<Bucket>, Ask)>, i64)> {
        let one = (
            1u64..20,
            1u64..100_000,
            1u64..4,
            proptest::option::of((0u64..20_000, 0i64..50_000)),
            any::<bool>(),
        )
            .prop_map(|(limit, per, cost, stored, dry)| {
                let mut a = Ask::new(Policy::new(limit, per).unwrap(), cost.min(limit), 0);
                a.dry_run = dry;
                let b = stored
                    .map(|(t, s)| Bucket::tokens_at(t.min(limit * crate::core::bucket::MILLI), s));
                (b, a)
            });
        (
            proptest::collection::vec(one, 1..=MAX_LIMITS),
            0i64..100_000,
        )
    }

    proptest! {
        #[test]
        fn never_charges_any_bucket_when_one_denies((case, now) in arb_case()) {
            let (stored, asks): (Vec<_>, Vec<_>) = case.into_iter().unzip();
            let d = decide_all(&stored, &asks, Slots::default(), now);
            if !d.verdict.took() {
                for ((s, a), b) in stored.iter().zip(&asks).zip(&d.buckets) {
                    let refilled = s.unwrap_or_else(|| Bucket::full(&a.policy, now)).refill(&a.policy, now).bucket;
                    prop_assert_eq!(*b, refilled);
                }
            }
        }

        #[test]
        fn admits_iff_every_single_decide_would((case, now) in arb_case()) {
            let (stored, asks): (Vec<_>, Vec<_>) = case.into_iter().unzip();
            let d = decide_all(&stored, &asks, Slots::default(), now);
            let singles: Vec<_> = stored.iter().zip(&asks).map(|(s, a)| decision::decide(*s, a, Slots::default(), now)).collect();
            prop_assert_eq!(d.verdict.took(), singles.iter().all(|s| s.verdict.took()));
            prop_assert_eq!(
                d.verdict.allowed,
                singles.iter().all(|s| s.verdict.took() || s.verdict.dry_run)
            );
            if d.verdict.took() {
                let charged: Vec<_> = singles.iter().map(|s| s.bucket).collect();
                prop_assert_eq!(&d.buckets, &charged);
            }
        }

        #[test]
        fn equals_decide_for_one_limit((case, now) in arb_case()) {
            let (s, a) = case[0];
            let d = decide_all(&[s], &[a], Slots::default(), now);
            let single = decision::decide(s, &a, Slots::default(), now);
            prop_assert_eq!((d.buckets[0], d.verdict), (single.bucket, single.verdict));
        }
    }
}
