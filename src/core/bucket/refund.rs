//! Giving tokens back (`ratelimit_refund()`; Laravel's `decrement()`, an `attempt()` whose
//! callback threw; rate-limiter-flexible's `reward()`): one step of the store, as a decision is,
//! computed here once for every backend.
//!
//! A refund brings the bucket up to `now` first (a window that has ended is rolled, so what it
//! used is not touched: the refund then gives nothing), then:
//! - a token bucket gets the milli-tokens back, never past its capacity;
//! - a token bucket in debt (reservations booked ahead, see [`Bucket::book`]) has its booked
//!   instant moved earlier by the time the milli-tokens take to earn, rounded down (so that it
//!   can only withhold, never mint), never before `now` nor before its latest booking's
//!   decision; what is left once the debt is paid is held as tokens, up to the capacity. A
//!   booking already told to wait keeps its instant: the queue behind it only gets shorter;
//! - a stepped bucket gets the milli-tokens back up to its capacity; in debt, they go to what
//!   its booked step leaves over (the step itself does not move: nothing is there before it);
//! - a fixed or sliding window has its current window's count lowered, never below 0 (so it
//!   never allows more than its limit); the previous window of a sliding one has ended and is
//!   left alone.
//!
//! A bucket saturated by forced charges (a debt booked up to [`MAX_BOOKED`], a window's count
//! at [`MAX_USED`]) gets nothing: charges past those bounds were taken without being counted.
//!
//! A missing bucket is left missing (nothing to give back to: it is full already). A clock
//! read earlier than the stored one earns nothing and rolls no window here either.

use super::*;

/// A refund's outcome: the state to write back when `given > 0` (nothing to write otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refunded {
    pub bucket: Bucket,
    /// Milli-tokens given back: 0 when the bucket was full or its window empty or ended.
    pub given: u64,
    pub clock_regressed: bool,
}

/// Returns up to `milli` milli-tokens to `stored` (refilled to `now` under `policy`, converted
/// if it was written under another policy); None for a missing bucket.
pub fn refund(stored: Option<Bucket>, policy: &Policy, milli: u64, now: i64) -> Option<Refunded> {
    let Refilled {
        bucket: mut b,
        clock_regressed,
    } = stored?.refill(policy, now);
    let given = match policy.kind {
        // Saturated: forced charges past what the store can count (a debt booked to
        // MAX_BOOKED, a window's count at MAX_USED) were taken uncounted, so what is owed is
        // not known: nothing is given back (the red team's three forced charges of 10^12 and
        // two refunds of 10^12 otherwise admitted the next call).
        Kind::TokenBucket if b.prev != 0 && b.stamp >= MAX_BOOKED => 0,
        Kind::FixedWindow | Kind::SlidingWindow if b.tokens >= MAX_USED => 0,
        Kind::TokenBucket if b.prev != 0 && b.stamp > now => b.pay_debt(policy, milli, now),
        // A stepped bucket in debt holds what its booked step leaves over: that grows, up to
        // the capacity, and the step stays where it is (nothing is there before it).
        Kind::TokenBucket | Kind::SteppedBucket => {
            let before = b.tokens.min(policy.capacity());
            b.tokens = before.saturating_add(milli).min(policy.capacity());
            b.tokens - before
        }
        Kind::FixedWindow | Kind::SlidingWindow => {
            let give = milli.min(b.tokens);
            b.tokens -= give;
            give
        }
    };
    Some(Refunded {
        bucket: b,
        given,
        clock_regressed,
    })
}

impl Bucket {
    /// A token bucket in debt given `milli` back (see the module's comment); what it was given.
    fn pay_debt(&mut self, policy: &Policy, milli: u64, now: i64) -> u64 {
        let (cap, per) = (policy.capacity() as u128, policy.per_ms as u128);
        // Never before the latest booking's decision: a clock read earlier than it ran backwards.
        let floor = now.max(self.prev.min(i64::MAX as u64) as i64);
        let gap = self.stamp.abs_diff(floor) as u128;
        // The time `milli` take to earn, rounded down: it earns at most `milli`.
        let back = milli as u128 * per / cap;
        if self.stamp > floor && back < gap {
            self.stamp -= back as i64;
            return (back * cap / per).min(milli as u128) as u64;
        }
        // The debt is paid: what is left over is held from `floor` on.
        let owed = if self.stamp > floor {
            self.owed(policy, floor)
        } else {
            0
        };
        let tokens = milli.saturating_sub(owed).min(policy.capacity());
        *self = Self::tokens_at(tokens, floor);
        owed.min(milli) + tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::{decide, peek, Ask};
    use crate::core::lease::Slots;
    use proptest::prelude::*;

    fn policy(limit: u64, per_ms: u64, kind: Kind) -> Policy {
        Policy::new(limit, per_ms).unwrap().with_kind(kind)
    }

    fn kinds() -> impl Strategy<Value = Kind> {
        prop::sample::select(Kind::ALL.to_vec())
    }

    #[test]
    fn a_missing_bucket_is_left_missing() {
        for kind in Kind::ALL {
            assert_eq!(refund(None, &policy(5, 1_000, kind), 3_000, 7), None);
        }
    }

    #[test]
    fn a_token_bucket_gets_its_tokens_back_up_to_its_capacity() {
        let p = policy(5, 60_000, Kind::TokenBucket);
        let r = refund(Some(Bucket::tokens_at(1_000, 100)), &p, 3_000, 100).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (4_000, 3_000));
        let r = refund(Some(r.bucket), &p, 3_000, 100).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (5_000, 1_000));
        let r = refund(Some(r.bucket), &p, 3_000, 100).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (5_000, 0));
    }

    #[test]
    fn a_fixed_window_lowers_its_count_never_below_zero() {
        let p = policy(5, 10_000, Kind::FixedWindow);
        let mut b = Bucket::full(&p, 0);
        b.take(&p, 3_000, 0);
        let r = refund(Some(b), &p, 2_000, 4_000).unwrap();
        assert_eq!(
            (r.bucket.tokens, r.bucket.stamp, r.given),
            (1_000, 0, 2_000)
        );
        let r = refund(Some(r.bucket), &p, 2_000, 4_000).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (0, 1_000));
    }

    /// Forced charges past what a bucket can count (a debt stops at MAX_BOOKED, a window's
    /// count at MAX_USED) are taken uncounted, so a refund of a saturated bucket gives
    /// nothing: three forced charges of 10^12 tokens and two refunds of 10^12 leave the next
    /// call denied, on every policy (found by the red team).
    #[test]
    fn a_bucket_saturated_by_forced_charges_gets_nothing_back() {
        for kind in Kind::ALL {
            let p = policy(1, 3_600_000, kind);
            let mut b = None;
            for _ in 0..3 {
                let d = decide(
                    b,
                    &Ask::new(p, MAX_LIMIT, 0).reserving(u64::MAX),
                    Slots::default(),
                    0,
                );
                b = Some(d.bucket);
            }
            for _ in 0..2 {
                let r = refund(b, &p, MAX_LIMIT * MILLI, 0).unwrap();
                if kind != Kind::SteppedBucket {
                    assert_eq!(r.given, 0, "{kind:?}");
                }
                b = Some(r.bucket);
            }
            let after = decide(b, &Ask::new(p, 1, 0), Slots::default(), 0);
            assert!(!after.verdict.allowed, "{kind:?}");
        }
    }

    #[test]
    fn a_window_that_has_ended_is_left_alone() {
        let p = policy(5, 10_000, Kind::FixedWindow);
        let mut b = Bucket::full(&p, 0);
        b.take(&p, 3_000, 0);
        let r = refund(Some(b), &p, 2_000, 10_000).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (0, 0));
    }

    /// The store cannot tell when the tokens it is given back were taken: a refund made once
    /// their window has ended and a later one has counted lowers that later window's count, so
    /// that window admits past its limit (usage.md asks for refunds before the window ends).
    #[test]
    fn a_refund_lowers_the_window_running_when_it_is_made() {
        let p = policy(5, 10_000, Kind::FixedWindow);
        let ask = Ask::new(p, 5, 0);
        // 5 taken in [0, 10 s), then 5 more in [10 s, 20 s) by others: both windows full.
        let first = decide(None, &ask, Slots::default(), 0);
        let second = decide(Some(first.bucket), &ask, Slots::default(), 10_000);
        assert!(first.verdict.allowed && second.verdict.allowed);
        // The first 5 given back at 11 s: the second window is emptied, and admits 5 more.
        let r = refund(Some(second.bucket), &p, 5_000, 11_000).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (0, 5_000));
        assert!(
            decide(Some(r.bucket), &ask, Slots::default(), 11_000)
                .verdict
                .allowed
        );
    }

    /// A sliding window's tokens given back once the next window has started (while they
    /// still weigh on it as the previous window's) come off the current count, taken by others:
    /// more is admitted than if they had never been taken (usage.md asks for refunds before the
    /// next window starts).
    #[test]
    fn a_sliding_refund_after_its_window_lowers_the_next_ones_count() {
        let p = policy(10, 10_000, Kind::SlidingWindow);
        let ten = Ask::new(p, 10, 0);
        // 10 taken at 0; at 19.9 s the previous window weighs floor(10 * 0.01) = 0: 10 more.
        let first = decide(None, &ten, Slots::default(), 0);
        let second = decide(Some(first.bucket), &ten, Slots::default(), 19_900);
        assert!(first.verdict.allowed && second.verdict.allowed);
        let r = refund(Some(second.bucket), &p, 10_000, 19_900).unwrap();
        assert_eq!(
            (r.bucket.tokens, r.bucket.prev, r.given),
            (0, 10_000, 10_000)
        );
        // Had the first 10 never been taken, the window would be full; it admits 10 more.
        let never = decide(None, &ten, Slots::default(), 19_900);
        assert!(
            !decide(Some(never.bucket), &ten, Slots::default(), 19_900)
                .verdict
                .allowed
        );
        assert!(
            decide(Some(r.bucket), &ten, Slots::default(), 19_900)
                .verdict
                .allowed
        );
    }

    #[test]
    fn a_sliding_window_leaves_the_previous_window_alone() {
        let p = policy(4, 10_000, Kind::SlidingWindow);
        let b = Bucket {
            tokens: 1_000,
            stamp: 10_000,
            prev: 4_000,
            kind: Kind::SlidingWindow,
        };
        let r = refund(Some(b), &p, 3_000, 12_000).unwrap();
        assert_eq!((r.bucket.tokens, r.bucket.prev, r.given), (0, 4_000, 1_000));
    }

    #[test]
    fn a_debt_is_paid_by_moving_the_booked_instant_earlier() {
        // 1 token per second; booked 3 s ahead at t = 1000.
        let p = policy(1, 1_000, Kind::TokenBucket);
        let debt = Bucket {
            tokens: 0,
            stamp: 4_000,
            prev: 1_000,
            kind: Kind::TokenBucket,
        };
        let r = refund(Some(debt), &p, 2_000, 1_000).unwrap();
        assert_eq!(
            (r.bucket.stamp, r.bucket.prev, r.given),
            (2_000, 1_000, 2_000)
        );
        // 5 back on a debt of 3: paid, and 1 held (the capacity), from now.
        let r = refund(Some(debt), &p, 5_000, 1_000).unwrap();
        assert_eq!(r.bucket, Bucket::tokens_at(1_000, 1_000));
        assert_eq!(r.given, 4_000);
    }

    #[test]
    fn a_stepped_debt_keeps_its_step_and_holds_more_at_it() {
        // 5 tokens, 2 back every second; booked to the step at t = 3000, 1 left over there.
        let p = policy(5, 1_000, Kind::SteppedBucket)
            .with_amount(2)
            .unwrap();
        let debt = Bucket {
            tokens: 1_000,
            stamp: 3_000,
            prev: 1_000,
            kind: Kind::SteppedBucket,
        };
        let r = refund(Some(debt), &p, 2_000, 1_500).unwrap();
        assert_eq!(
            (r.bucket.stamp, r.bucket.tokens, r.given),
            (3_000, 3_000, 2_000)
        );
        // Nothing is there before the step, refund or not.
        assert_eq!(r.bucket.available(&p, 2_999), 0);
        // Never more than the capacity at the step.
        let r = refund(Some(r.bucket), &p, 9_000, 1_500).unwrap();
        assert_eq!((r.bucket.tokens, r.given), (5_000, 2_000));
    }

    #[test]
    fn a_debt_read_by_a_clock_before_its_booking_is_paid_from_the_booking_on() {
        let p = policy(1, 1_000, Kind::TokenBucket);
        let debt = Bucket {
            tokens: 0,
            stamp: 4_000,
            prev: 1_000,
            kind: Kind::TokenBucket,
        };
        let r = refund(Some(debt), &p, 9_000, 500).unwrap();
        assert_eq!(r.bucket, Bucket::tokens_at(1_000, 1_000));
    }

    /// A random state reached by a random sequence of admissions, with the time of the last.
    fn reached(p: &Policy, steps: &[(i64, u64)]) -> (Bucket, i64) {
        let mut now = 1_000_000i64;
        let mut b = Bucket::full(p, now);
        for &(dt, cost) in steps {
            now = (now + dt).max(0);
            b = decide(
                Some(b),
                &Ask::new(*p, cost.min(p.limit()), 0),
                Slots::default(),
                now,
            )
            .bucket;
        }
        (b, now)
    }

    proptest! {
        /// Taking k tokens and giving k back leaves the bucket as if untouched: every later
        /// peek answers the same.
        #[test]
        fn take_then_refund_is_untouched(
            kind in kinds(), limit in 1u64..20, per_ms in 1u64..100_000,
            steps in prop::collection::vec((-2_000i64..50_000, 1u64..5), 0..30),
            k in 1u64..20, later in prop::collection::vec(0i64..200_000, 1..8),
        ) {
            let p = policy(limit, per_ms, kind);
            let (b, now) = reached(&p, &steps);
            let k = k.min(limit);
            let d = decide(Some(b), &Ask::new(p, k, 0), Slots::default(), now);
            prop_assume!(d.verdict.allowed);
            let r = refund(Some(d.bucket), &p, k * MILLI, now).unwrap();
            prop_assert_eq!(r.given, k * MILLI);
            for dt in later {
                prop_assert_eq!(peek(Some(r.bucket), &p, now + dt), peek(Some(b), &p, now + dt));
            }
        }

        /// No refund, however large, of any state at any clock, holds more than the capacity,
        /// gives more than asked, or makes a later call get more than a full bucket would.
        #[test]
        fn a_refund_never_passes_the_capacity(
            kind in kinds(), limit in 1u64..20, per_ms in 1u64..100_000,
            steps in prop::collection::vec((-2_000i64..50_000, 1u64..5), 0..30),
            milli in 1u64..100_000, back in -100_000i64..100_000,
        ) {
            let p = policy(limit, per_ms, kind);
            let (b, now) = reached(&p, &steps);
            let at = now + back;
            let r = refund(Some(b), &p, milli, at).unwrap();
            prop_assert!(r.given <= milli);
            prop_assert!(r.bucket.available(&p, at) <= p.capacity());
            let full = peek(None, &p, at);
            prop_assert!(peek(Some(r.bucket), &p, at).remaining <= full.remaining);
        }

        /// A reservation given back leaves no more available, now or later, than before it
        /// was booked: paying a debt mints nothing.
        #[test]
        fn a_booking_given_back_mints_nothing(
            limit in 1u64..20, per_ms in 1u64..100_000,
            steps in prop::collection::vec((-2_000i64..50_000, 1u64..5), 0..30),
            k in 1u64..60, later in prop::collection::vec(0i64..500_000, 1..8),
        ) {
            let p = policy(limit, per_ms, Kind::TokenBucket);
            let (b, now) = reached(&p, &steps);
            let d = decide(Some(b), &Ask::new(p, k, 0).reserving(u64::MAX), Slots::default(), now);
            prop_assert!(d.verdict.allowed);
            let r = refund(Some(d.bucket), &p, k * MILLI, now).unwrap();
            for dt in later {
                let (was, is) = (peek(Some(b), &p, now + dt), peek(Some(r.bucket), &p, now + dt));
                prop_assert!(is.remaining <= was.remaining, "at +{}: {:?} > {:?}", dt, is, was);
            }
        }

        /// Whatever the sequence of admissions and refunds of what was admitted, the tokens
        /// kept never exceed one bucket plus what the elapsed time earned.
        #[test]
        fn refunds_of_what_was_taken_keep_the_bound(
            kind in kinds(), limit in 1u64..20, per_ms in 1u64..100_000,
            steps in prop::collection::vec((-5_000i64..20_000, 1u64..5, any::<bool>()), 1..200),
        ) {
            let p = policy(limit, per_ms, kind);
            let start = 1_000_000i64;
            let (mut now, mut latest) = (start, start);
            let mut b = Bucket::full(&p, now);
            let (mut kept, mut owed_back): (u128, u64) = (0, 0);
            for (dt, cost, give_back) in steps {
                now = (now + dt).max(0);
                latest = latest.max(now);
                if give_back && owed_back > 0 {
                    let r = refund(Some(b), &p, owed_back, now).unwrap();
                    b = r.bucket;
                    kept -= r.given as u128;
                    owed_back -= r.given;
                    continue;
                }
                let cost = cost.min(limit);
                let d = decide(Some(b), &Ask::new(p, cost, 0), Slots::default(), now);
                b = d.bucket;
                if d.verdict.allowed {
                    kept += (cost * MILLI) as u128;
                    owed_back += cost * MILLI;
                }
            }
            // A window's count is bounded per window: at most one window more than elapsed
            // periods (and a sliding window's is tighter).
            let periods = (latest - start) as u128 / per_ms as u128 + 1;
            let bound = match kind {
                Kind::TokenBucket => p.capacity() as u128
                    + (latest - start) as u128 * p.capacity() as u128 / per_ms as u128,
                _ => periods * p.capacity() as u128,
            };
            prop_assert!(kept <= bound, "kept {} > bound {}", kept, bound);
        }
    }
}
