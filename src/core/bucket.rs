//! Token buckets in integer milli-tokens.
//!
//! A bucket holds `limit` tokens and earns `limit` tokens every `per` milliseconds,
//! continuously. The state is two integers: the milli-tokens held and `stamp`, the instant up
//! to which earnings have been credited. Refilling credits the whole milli-tokens earned since
//! `stamp` and moves `stamp` forward only by the time those milli-tokens took to earn (rounded
//! up), so a bucket polled faster than it earns keeps its fraction instead of losing it, and
//! the rounding can only ever withhold, never mint. A clock that reads earlier than `stamp`
//! earns nothing and leaves `stamp` where it is.

/// Milli-tokens per token.
pub const MILLI: u64 = 1000;
/// Largest `limit` accepted: `limit * MILLI` and every product below fit 128-bit arithmetic.
pub const MAX_LIMIT: u64 = 1_000_000_000_000;
/// Shortest window: one millisecond.
pub const MIN_PER_MS: u64 = 1;
/// Longest window: 10^9 seconds.
pub const MAX_PER_MS: u64 = 1_000_000_000_000;

/// Why a policy was refused. The PHP glue turns each into its own `ValueError` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    LimitTooSmall,
    LimitTooLarge,
    PerTooSmall,
    PerTooLarge,
}

/// `limit` tokens per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    limit: u64,
    per_ms: u64,
}

impl Policy {
    pub fn new(limit: u64, per_ms: u64) -> Result<Self, PolicyError> {
        match (limit, per_ms) {
            (0, _) => Err(PolicyError::LimitTooSmall),
            (l, _) if l > MAX_LIMIT => Err(PolicyError::LimitTooLarge),
            (_, p) if p < MIN_PER_MS => Err(PolicyError::PerTooSmall),
            (_, p) if p > MAX_PER_MS => Err(PolicyError::PerTooLarge),
            _ => Ok(Self { limit, per_ms }),
        }
    }

    /// Seconds (as given to PHP) to whole milliseconds, rounded to nearest.
    pub fn per_ms_from_seconds(per: f64) -> Option<u64> {
        if !per.is_finite() || per < 0.0 {
            return None;
        }
        let ms = (per * 1000.0).round();
        (ms <= MAX_PER_MS as f64).then_some(ms as u64)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn per_ms(&self) -> u64 {
        self.per_ms
    }

    /// Capacity in milli-tokens.
    pub fn capacity(&self) -> u64 {
        self.limit * MILLI
    }

    /// Whole milli-tokens earned in `elapsed_ms`, at most one full bucket.
    pub fn earned(&self, elapsed_ms: u64) -> u64 {
        let e = elapsed_ms as u128 * self.capacity() as u128 / self.per_ms as u128;
        e.min(self.capacity() as u128) as u64
    }

    /// Milliseconds needed to earn `milli` milli-tokens, rounded up.
    pub fn time_to_earn(&self, milli: u64) -> u64 {
        let cap = self.capacity() as u128;
        (milli as u128 * self.per_ms as u128).div_ceil(cap) as u64
    }
}

/// The stored state of one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Milli-tokens held, `0..=capacity`.
    pub tokens: u64,
    /// Wall-clock milliseconds up to which earnings are credited.
    pub stamp: i64,
}

/// A bucket after refilling, and whether the clock was seen running backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refilled {
    pub bucket: Bucket,
    pub clock_regressed: bool,
}

impl Bucket {
    /// A bucket seen for the first time starts full.
    pub fn full(policy: &Policy, now: i64) -> Self {
        Self {
            tokens: policy.capacity(),
            stamp: now,
        }
    }

    /// Credits what was earned up to `now`.
    pub fn refill(self, policy: &Policy, now: i64) -> Refilled {
        let cap = policy.capacity();
        // A policy may have shrunk since the bucket was written: never hold more than it allows.
        let tokens = self.tokens.min(cap);
        if now < self.stamp {
            let bucket = Self {
                tokens,
                stamp: self.stamp,
            };
            return Refilled {
                bucket,
                clock_regressed: true,
            };
        }
        // `abs_diff`: a stamp read from a damaged file may be anything; no subtraction overflows.
        let elapsed = now.abs_diff(self.stamp);
        let earned = policy.earned(elapsed);
        let bucket = if tokens + earned >= cap {
            // Full: nothing left to carry, the time base may restart at `now`.
            Self {
                tokens: cap,
                stamp: now,
            }
        } else {
            // `time_to_earn(earned) <= elapsed` because `earned` was rounded down.
            Self {
                tokens: tokens + earned,
                stamp: self.stamp + policy.time_to_earn(earned) as i64,
            }
        };
        Refilled {
            bucket,
            clock_regressed: false,
        }
    }

    /// Milliseconds from `now` until the bucket holds at least `milli` milli-tokens
    /// (0 when it already does). Exact for a bucket returned by [`Bucket::refill`].
    pub fn wait_for(&self, policy: &Policy, milli: u64, now: i64) -> u64 {
        if self.tokens >= milli {
            return 0;
        }
        let ready = self.stamp as i128 + policy.time_to_earn(milli - self.tokens) as i128;
        (ready - now as i128).max(0) as u64
    }

    /// Milliseconds until full again.
    pub fn wait_until_full(&self, policy: &Policy, now: i64) -> u64 {
        self.wait_for(policy, policy.capacity(), now)
    }

    /// Milliseconds until one more whole token is held (0 when full).
    pub fn wait_for_next_token(&self, policy: &Policy, now: i64) -> u64 {
        if self.tokens >= policy.capacity() {
            return 0;
        }
        self.wait_for(policy, (self.tokens / MILLI + 1) * MILLI, now)
    }

    /// The wall-clock instant at which the bucket is full again: a bucket at or past it holds
    /// no information and may be dropped.
    pub fn full_at(&self, policy: &Policy) -> i64 {
        let need = policy.capacity().saturating_sub(self.tokens);
        self.stamp.saturating_add(policy.time_to_earn(need) as i64)
    }

    /// Whole tokens held.
    pub fn whole_tokens(&self) -> u64 {
        self.tokens / MILLI
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(limit: u64, per_ms: u64) -> Policy {
        Policy::new(limit, per_ms).unwrap()
    }

    #[test]
    fn policy_bounds_are_enforced() {
        assert_eq!(Policy::new(0, 1000), Err(PolicyError::LimitTooSmall));
        assert_eq!(
            Policy::new(MAX_LIMIT + 1, 1000),
            Err(PolicyError::LimitTooLarge)
        );
        assert_eq!(Policy::new(1, 0), Err(PolicyError::PerTooSmall));
        assert_eq!(
            Policy::new(1, MAX_PER_MS + 1),
            Err(PolicyError::PerTooLarge)
        );
        assert!(Policy::new(MAX_LIMIT, MIN_PER_MS).is_ok());
        assert!(Policy::new(1, MAX_PER_MS).is_ok());
    }

    #[test]
    fn seconds_convert_to_milliseconds() {
        assert_eq!(Policy::per_ms_from_seconds(0.001), Some(1));
        assert_eq!(Policy::per_ms_from_seconds(60.0), Some(60_000));
        assert_eq!(Policy::per_ms_from_seconds(1e9), Some(MAX_PER_MS));
        assert_eq!(Policy::per_ms_from_seconds(f64::NAN), None);
        assert_eq!(Policy::per_ms_from_seconds(f64::INFINITY), None);
        assert_eq!(Policy::per_ms_from_seconds(2e9), None);
    }

    #[test]
    fn a_new_bucket_is_full() {
        let p = policy(5, 60_000);
        assert_eq!(Bucket::full(&p, 7).tokens, 5000);
    }

    #[test]
    fn refill_is_continuous() {
        let p = policy(60, 60_000); // one token per second
        let b = Bucket {
            tokens: 0,
            stamp: 0,
        };
        assert_eq!(b.refill(&p, 500).bucket.tokens, 500);
        assert_eq!(b.refill(&p, 2_000).bucket.tokens, 2_000);
    }

    #[test]
    fn refill_never_exceeds_capacity() {
        let p = policy(5, 1_000);
        let b = Bucket {
            tokens: 4_000,
            stamp: 0,
        };
        let r = b.refill(&p, 1_000_000).bucket;
        assert_eq!(
            r,
            Bucket {
                tokens: 5_000,
                stamp: 1_000_000
            }
        );
    }

    #[test]
    fn slow_buckets_polled_often_still_refill() {
        // 5 per day earns one milli-token every 17.28 s; poll every second for a day.
        let p = policy(5, 86_400_000);
        let mut b = Bucket {
            tokens: 0,
            stamp: 0,
        };
        for t in (1_000..=86_400_000).step_by(1_000) {
            b = b.refill(&p, t).bucket;
        }
        assert_eq!(b.tokens, 5_000);
    }

    #[test]
    fn backwards_clock_mints_nothing_and_keeps_the_stamp() {
        let p = policy(10, 1_000);
        let b = Bucket {
            tokens: 1_000,
            stamp: 50_000,
        };
        let r = b.refill(&p, 40_000);
        assert!(r.clock_regressed);
        assert_eq!(r.bucket, b);
    }

    #[test]
    fn a_shrunk_policy_clamps_the_tokens() {
        let b = Bucket {
            tokens: 9_000,
            stamp: 0,
        };
        assert_eq!(b.refill(&policy(3, 1_000), 0).bucket.tokens, 3_000);
    }

    #[test]
    fn extreme_policies_do_not_overflow() {
        let p = policy(MAX_LIMIT, MIN_PER_MS);
        let b = Bucket {
            tokens: 0,
            stamp: 0,
        };
        assert_eq!(b.refill(&p, i64::MAX).bucket.tokens, p.capacity());
        let p = policy(1, MAX_PER_MS);
        assert_eq!(b.wait_until_full(&p, 0), MAX_PER_MS);
        assert_eq!(
            Bucket {
                tokens: 0,
                stamp: i64::MAX
            }
            .full_at(&p),
            i64::MAX
        );
    }

    #[test]
    fn wait_for_is_exact() {
        let p = policy(3, 1_000); // 3 milli-tokens per ms
        let b = Bucket {
            tokens: 0,
            stamp: 100,
        };
        let w = b.wait_for(&p, 1_000, 100);
        assert_eq!(w, 334);
        assert_eq!(b.refill(&p, 100 + w as i64 - 1).bucket.tokens / 1000, 0);
        assert_eq!(b.refill(&p, 100 + w as i64).bucket.tokens / 1000, 1);
    }

    #[test]
    fn next_token_wait_counts_the_fraction_held() {
        let p = policy(1, 1_000); // one milli-token per ms
        let b = Bucket {
            tokens: 0,
            stamp: 0,
        }
        .refill(&p, 400)
        .bucket;
        assert_eq!(b.wait_for_next_token(&p, 400), 600);
        assert_eq!(Bucket::full(&p, 0).wait_for_next_token(&p, 0), 0);
    }

    proptest! {
        /// However calls are spaced, costs chosen and the clock jumps back, the tokens taken
        /// never exceed one bucket plus what the elapsed time earned.
        #[test]
        fn never_admits_more_than_capacity_plus_refill(
            limit in 1u64..50,
            per_ms in 1u64..100_000,
            steps in proptest::collection::vec((-5_000i64..20_000, 1u64..5), 1..300),
        ) {
            let p = policy(limit, per_ms);
            let start = 1_000_000i64;
            let (mut now, mut latest) = (start, start);
            let mut b = Bucket::full(&p, now);
            let mut taken: u128 = 0;
            for (dt, cost) in steps {
                now = (now + dt).max(0);
                latest = latest.max(now);
                let r = b.refill(&p, now);
                b = r.bucket;
                prop_assert!(b.stamp <= latest);
                let cost = cost.min(limit) * MILLI;
                if b.tokens >= cost {
                    b.tokens -= cost;
                    taken += cost as u128;
                }
            }
            let bound = p.capacity() as u128
                + (latest - start) as u128 * p.capacity() as u128 / per_ms as u128;
            prop_assert!(taken <= bound, "taken {} > bound {}", taken, bound);
        }

        /// Any stored state (a damaged file may hold anything) refills without panicking and
        /// never beyond capacity.
        #[test]
        fn any_stored_state_refills_within_capacity(
            tokens in any::<u64>(), stamp in any::<i64>(), now in any::<i64>(),
            limit in 1u64..=MAX_LIMIT, per_ms in MIN_PER_MS..=MAX_PER_MS,
        ) {
            let p = policy(limit, per_ms);
            let b = Bucket { tokens, stamp }.refill(&p, now).bucket;
            prop_assert!(b.tokens <= p.capacity());
            let _ = (b.wait_until_full(&p, now), b.wait_for_next_token(&p, now), b.full_at(&p));
        }

        /// A clock that only runs backwards from the last stamp never adds a milli-token.
        #[test]
        fn backwards_clock_never_mints(tokens in 0u64..5_000, back in 1i64..1_000_000) {
            let p = policy(5, 1_000);
            let b = Bucket { tokens, stamp: 2_000_000 };
            let r = b.refill(&p, 2_000_000 - back);
            prop_assert!(r.clock_regressed);
            prop_assert_eq!(r.bucket.tokens, tokens);
            prop_assert_eq!(r.bucket.stamp, 2_000_000);
        }

        /// Polling often keeps the earnings: refilling at many instants never credits more
        /// than refilling once, and withholds at most the rounding of each step (less than
        /// one millisecond of earnings per poll), never the time base.
        #[test]
        fn frequent_polling_keeps_the_earnings(
            per_ms in 1u64..10_000_000,
            polls in proptest::collection::vec(1i64..50_000, 1..100),
        ) {
            let p = policy(7, per_ms);
            let start = Bucket { tokens: 0, stamp: 0 };
            let mut b = start;
            let mut now = 0;
            let n = polls.len() as u64;
            for dt in polls {
                now += dt;
                b = b.refill(&p, now).bucket;
            }
            let once = start.refill(&p, now).bucket;
            prop_assert!(b.tokens <= once.tokens);
            let per_poll = p.capacity().div_ceil(per_ms) + 1;
            prop_assert!(once.tokens - b.tokens <= n * per_poll,
                "lost {} over {} polls", once.tokens - b.tokens, n);
        }
    }
}
