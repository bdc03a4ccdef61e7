//! Reservations (`ratelimit_reserve`): what a booking takes, when it says the tokens are
//! there, and what it never does (book past the maximum wait, let more through than the
//! policy earns, mint on a clock that runs backwards).

use super::*;
use crate::core::decision::{decide, Ask, Decided, Reason};
use crate::core::lease::Slots;
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;

fn reserve(b: Option<Bucket>, p: Policy, cost: u64, max_wait: u64, now: i64) -> Decided {
    decide(
        b,
        &Ask::new(p, cost, 0).reserving(max_wait),
        Slots::default(),
        now,
    )
}

fn acquire(b: Option<Bucket>, p: Policy, cost: u64, now: i64) -> Decided {
    decide(b, &Ask::new(p, cost, 0), Slots::default(), now)
}

fn kind_of(i: u8) -> Kind {
    Kind::ALL[i as usize % Kind::ALL.len()]
}

#[test]
fn a_bucket_books_each_token_at_the_instant_it_is_earned() {
    let p = Policy::new(5, 1_000).unwrap(); // a token every 200 ms
    let mut b = None;
    let mut waits = vec![];
    for _ in 0..21 {
        let d = reserve(b, p, 1, 3_000, T0);
        if d.verdict.allowed {
            b = Some(d.bucket);
        }
        waits.push(d.verdict.allowed.then_some(d.verdict.wait_ms));
    }
    let mut want: Vec<Option<u64>> = vec![Some(0); 5];
    want.extend((1..=15).map(|i| Some(i * 200)));
    want.push(None);
    assert_eq!(waits, want);
}

#[test]
fn a_denial_past_the_maximum_wait_takes_nothing_and_says_when_to_retry() {
    let p = Policy::new(1, 1_000).unwrap();
    let b = acquire(None, p, 1, T0).bucket;
    let d = reserve(Some(b), p, 1, 999, T0);
    assert_eq!(
        (
            d.verdict.allowed,
            d.verdict.reason,
            d.verdict.retry_after_ms
        ),
        (false, Reason::Rate, 1_000)
    );
    assert_eq!(d.bucket, b.refill(&p, T0).bucket);
    assert_eq!(d.verdict.wait_ms, 0);
}

#[test]
fn a_booking_of_exactly_the_maximum_wait_is_made() {
    let p = Policy::new(1, 1_000).unwrap();
    let b = acquire(None, p, 1, T0).bucket;
    let d = reserve(Some(b), p, 1, 1_000, T0);
    assert_eq!((d.verdict.allowed, d.verdict.wait_ms), (true, 1_000));
}

#[test]
fn a_booked_bucket_denies_plain_calls_until_the_booking_is_paid() {
    let p = Policy::new(5, 1_000).unwrap();
    let mut b = acquire(None, p, 5, T0).bucket;
    b = reserve(Some(b), p, 2, u64::MAX, T0).bucket; // booked at T0 + 400
    let d = acquire(Some(b), p, 1, T0 + 599);
    assert_eq!((d.verdict.allowed, d.verdict.retry_after_ms), (false, 1));
    assert!(acquire(Some(b), p, 1, T0 + 600).verdict.allowed);
}

#[test]
fn reserved_counts_the_tokens_booked_and_not_yet_earned() {
    let p = Policy::new(5, 1_000).unwrap();
    let mut b = acquire(None, p, 5, T0).bucket;
    for _ in 0..3 {
        b = reserve(Some(b), p, 1, u64::MAX, T0).bucket;
    }
    let at = |t| decision_peek(b, p, t);
    assert_eq!(at(T0), (0, 3));
    assert_eq!(at(T0 + 200), (0, 2));
    assert_eq!(at(T0 + 201), (0, 2), "a token partly earned is still owed");
    assert_eq!(at(T0 + 600), (0, 0));
    assert_eq!(at(T0 + 800), (1, 0));
}

/// remaining and reserved as a peek reports them.
fn decision_peek(b: Bucket, p: Policy, now: i64) -> (u64, u64) {
    let v = crate::core::decision::peek(Some(b), &p, now);
    (v.remaining, v.reserved)
}

#[test]
fn a_forced_charge_in_a_fixed_window_keeps_counting_as_laravel_hit_does() {
    let p = Policy::new(5, 60_000).unwrap().with_kind(Kind::FixedWindow);
    let mut b = None;
    let mut attempts = vec![];
    for i in 0..8 {
        let d = reserve(b, p, 1, u64::MAX, T0 + i);
        b = Some(d.bucket);
        let v = d.verdict;
        attempts.push(p.limit() - v.remaining + v.reserved);
        let wait = if i < 5 { 0 } else { 60_000 - i as u64 };
        assert_eq!((v.allowed, v.wait_ms), (true, wait), "hit {}", i + 1);
    }
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6, 7, 8]);
    // The window's end forgets it all, as Laravel's and Symfony's fixed windows do.
    let d = acquire(b, p, 5, T0 + 60_000);
    assert!(d.verdict.allowed);
}

#[test]
fn a_cost_past_the_limit_is_a_debt_of_a_bucket_and_waits_for_an_empty_window() {
    let bucket = Policy::new(5, 1_000).unwrap();
    let d = reserve(None, bucket, 8, u64::MAX, T0);
    assert_eq!((d.verdict.allowed, d.verdict.wait_ms), (true, 600));
    assert_eq!(d.verdict.reserved, 3);
    assert!(!acquire(Some(d.bucket), bucket, 1, T0 + 799).verdict.allowed);
    assert!(acquire(Some(d.bucket), bucket, 1, T0 + 800).verdict.allowed);

    for kind in [Kind::FixedWindow, Kind::SlidingWindow] {
        let p = bucket.with_kind(kind);
        let d = reserve(None, p, 8, u64::MAX, T0);
        assert_eq!(
            (d.verdict.allowed, d.verdict.wait_ms),
            (true, 0),
            "{kind:?}"
        );
        assert_eq!(d.verdict.reserved, 3, "{kind:?}");
        let d = reserve(Some(d.bucket), p, 8, 998, T0 + 1);
        assert!(!d.verdict.allowed, "{kind:?}: a window still counts them");
    }
}

#[test]
fn a_read_between_a_booking_and_its_instant_is_no_clock_regression() {
    let p = Policy::new(1, 1_000).unwrap();
    let b = acquire(None, p, 1, T0).bucket;
    let booked = reserve(Some(b), p, 1, u64::MAX, T0 + 100).bucket;
    assert_eq!(booked.stamp, T0 + 1_000);
    assert!(!booked.refill(&p, T0 + 500).clock_regressed);
    assert!(booked.refill(&p, T0 + 99).clock_regressed);
    assert!(!booked.refill(&p, T0 + 1_000).clock_regressed);
}

#[test]
fn a_paid_debt_leaves_no_mark() {
    let p = Policy::new(1, 1_000).unwrap();
    let b = acquire(None, p, 1, T0).bucket;
    let booked = reserve(Some(b), p, 1, u64::MAX, T0).bucket;
    let later = booked.refill(&p, T0 + 3_000).bucket;
    assert_eq!(later, Bucket::tokens_at(1_000, T0 + 3_000));
}

#[test]
fn a_booked_bucket_switched_to_a_window_reports_no_clock_regression() {
    let tb = Policy::new(1, 1_000).unwrap();
    let b = acquire(None, tb, 1, T0).bucket;
    let booked = reserve(Some(b), tb, 1, u64::MAX, T0).bucket; // booked at T0 + 1_000
    for kind in [Kind::FixedWindow, Kind::SlidingWindow] {
        let w = tb.with_kind(kind);
        let switched = acquire(Some(booked), w, 1, T0 + 10).bucket;
        assert!(
            !switched.refill(&w, T0 + 20).clock_regressed,
            "{kind:?}: a clock read after the switch is no regression"
        );
    }
}

#[test]
fn a_debt_of_forced_charges_stops_at_the_latest_booked_instant() {
    let p = Policy::new(1, MAX_PER_MS).unwrap();
    let mut b = acquire(None, p, 1, T0).bucket;
    for _ in 0..5 {
        b = reserve(Some(b), p, 1, u64::MAX, T0).bucket;
    }
    b.stamp = MAX_BOOKED - 1;
    let d = reserve(Some(b), p, 1, u64::MAX, T0);
    assert_eq!((d.verdict.allowed, d.bucket.stamp), (true, MAX_BOOKED));
    assert!(!acquire(Some(d.bucket), p, 1, T0).verdict.allowed);
}

proptest! {
    /// The wait a reservation is told is exact: the tokens it booked are available at that
    /// instant if nothing else is taken, and not a millisecond earlier; it never exceeds the
    /// maximum, and a denial takes nothing.
    #[test]
    fn the_wait_is_exact_and_never_past_the_maximum(
        kind in 0u8..4,
        limit in 1u64..8,
        per_ms in 1u64..3_000,
        amount in 1u64..10,
        steps in proptest::collection::vec((0i64..700, 1u64..8, 0u64..5_000, any::<bool>()), 1..40),
    ) {
        let p = Policy::new(limit, per_ms).unwrap().with_kind(kind_of(kind)).with_amount(amount).unwrap();
        let mut now = T0;
        let mut b: Option<Bucket> = None;
        for (dt, cost, max_wait, plain) in steps {
            now += dt;
            let cost = cost.min(limit);
            if plain {
                b = Some(acquire(b, p, cost, now).bucket);
                continue;
            }
            let before = b.unwrap_or_else(|| Bucket::full(&p, now)).refill(&p, now).bucket;
            let d = reserve(b, p, cost, max_wait, now);
            if !d.verdict.allowed {
                prop_assert_eq!(d.bucket, before, "a denial takes nothing");
                prop_assert!(d.verdict.retry_after_ms > 0);
                b = Some(d.bucket);
                continue;
            }
            let w = d.verdict.wait_ms;
            prop_assert!(w <= max_wait);
            let at = now + w as i64;
            let ready = |t: i64| before.refill(&p, t).bucket.available(&p, t) >= cost * MILLI;
            prop_assert!(ready(at), "booked tokens not there at the booked instant");
            if w > 0 {
                prop_assert!(!ready(at - 1), "booked tokens there a millisecond earlier");
            }
            b = Some(d.bucket);
        }
    }

    /// A token bucket with bookings, each token counted at the instant it is used (a booked
    /// one at its booked instant): over any interval [a, b] at most `limit` plus what
    /// `b - a` earns, forced charges included.
    #[test]
    fn a_bucket_never_lets_more_through_than_it_earns_over_any_interval(
        limit in 1u64..8,
        per_ms in 1u64..3_000,
        steps in proptest::collection::vec((0i64..700, 1u64..8, 0u64..8_000, 0u8..3), 1..60),
    ) {
        let p = Policy::new(limit, per_ms).unwrap();
        let mut now = T0;
        let mut b: Option<Bucket> = None;
        let mut used: Vec<(i64, u64)> = vec![];
        for (dt, cost, max_wait, how) in steps {
            now += dt;
            let cost = cost.min(limit);
            let d = match how {
                0 => acquire(b, p, cost, now),
                1 => reserve(b, p, cost, max_wait, now),
                _ => reserve(b, p, cost, u64::MAX, now),
            };
            if d.verdict.took() {
                used.push((now + d.verdict.wait_ms as i64, cost * MILLI));
            }
            b = Some(d.bucket);
        }
        used.sort();
        for i in 0..used.len() {
            let mut sum: u128 = 0;
            for j in i..used.len() {
                sum += used[j].1 as u128;
                let span = (used[j].0 - used[i].0) as u128;
                let bound = p.capacity() as u128 * per_ms as u128 + span * p.capacity() as u128;
                prop_assert!(sum * per_ms as u128 <= bound,
                    "{} milli-tokens used in {} ms", sum, span);
            }
        }
    }

    /// A clock read earlier than the latest one never books an earlier instant than the latest
    /// reading would, nor finds more available: going back mints nothing.
    #[test]
    fn a_clock_going_back_books_nothing_sooner(
        kind in 0u8..4,
        limit in 1u64..8,
        per_ms in 1u64..3_000,
        amount in 1u64..10,
        steps in proptest::collection::vec((0i64..700, 1u64..8, any::<bool>()), 1..30),
        back in 1i64..5_000,
        cost in 1u64..8,
    ) {
        let p = Policy::new(limit, per_ms).unwrap().with_kind(kind_of(kind)).with_amount(amount).unwrap();
        let mut now = T0;
        let mut b: Option<Bucket> = None;
        for (dt, c, booking) in steps {
            now += dt;
            let c = c.min(limit);
            let d = if booking { reserve(b, p, c, u64::MAX, now) } else { acquire(b, p, c, now) };
            b = Some(d.bucket);
        }
        let b = b.unwrap();
        let cost = cost.min(limit);
        let latest = reserve(Some(b), p, cost, u64::MAX, now).verdict;
        let earlier = now - back;
        let early = reserve(Some(b), p, cost, u64::MAX, earlier).verdict;
        // (Tokens held may be used at the earlier reading, as a plain call may: instants up
        // to the latest reading are alike.)
        let early_at = (earlier + early.wait_ms as i64).max(now);
        prop_assert!(early_at >= now + latest.wait_ms as i64,
            "booked at {} going back, {} at the latest reading",
            early_at, now + latest.wait_ms as i64);
        let r = b.refill(&p, earlier).bucket;
        prop_assert!(r.available(&p, earlier) <= b.refill(&p, now).bucket.available(&p, now));
    }
}

proptest! {
    /// A stepped bucket with bookings, each token counted at the instant it is used (a booked
    /// one at its booked instant): over any interval [a, b] at most `limit` plus `amount` for
    /// each step that can fall in it (steps are at least `per` apart: a bucket found full
    /// starts its steps later, never sooner), forced charges included.
    #[test]
    fn a_stepped_bucket_never_lets_more_through_than_its_steps_bring(
        limit in 1u64..8,
        per_ms in 1u64..3_000,
        amount in 1u64..10,
        steps in proptest::collection::vec((0i64..700, 1u64..8, 0u64..8_000, 0u8..3), 1..60),
    ) {
        let p = Policy::new(limit, per_ms).unwrap().with_kind(Kind::SteppedBucket)
            .with_amount(amount).unwrap();
        let mut now = T0;
        let mut b: Option<Bucket> = None;
        let mut used: Vec<(i64, u64)> = vec![];
        for (dt, cost, max_wait, how) in steps {
            now += dt;
            let cost = cost.min(limit);
            let d = match how {
                0 => acquire(b, p, cost, now),
                1 => reserve(b, p, cost, max_wait, now),
                _ => reserve(b, p, cost, u64::MAX, now),
            };
            if d.verdict.took() {
                used.push((now + d.verdict.wait_ms as i64, cost));
            }
            b = Some(d.bucket);
        }
        used.sort();
        for i in 0..used.len() {
            let mut sum = 0;
            for j in i..used.len() {
                sum += used[j].1;
                let span = (used[j].0 - used[i].0) as u64;
                let bound = limit + (span / per_ms + 1) * amount.min(limit);
                prop_assert!(sum <= bound, "{} tokens used in {} ms", sum, span);
            }
        }
    }
}

/// Symfony's TokenBucketLimiterTest::testBucketRefilledWithStrictFrequency, in ms: 1000 tokens,
/// 100 more every 15 s; 300 taken, then one every 4 s: 100 come back at each whole 15 s from
/// the first call, the bucket never past 1000.
#[test]
fn a_stepped_bucket_refills_its_amount_at_each_whole_period() {
    let p = Policy::new(1_000, 15_000)
        .unwrap()
        .with_kind(Kind::SteppedBucket)
        .with_amount(100)
        .unwrap();
    let d = acquire(None, p, 300, T0);
    assert_eq!(d.verdict.remaining, 700);
    let mut b = d.bucket;
    let mut expected = 699;
    for i in 1..=20i64 {
        let d = acquire(Some(b), p, 1, T0 + 4_000 * i);
        assert!(d.verdict.allowed);
        assert_eq!(d.verdict.remaining, expected, "call {i}");
        b = d.bucket;
        expected -= 1;
        if [3, 7, 11].contains(&i) {
            expected += 100;
        } else if i == 14 || i == 18 {
            expected = 999;
        }
    }
}

#[test]
fn a_stepped_bucket_denial_waits_for_the_step_that_brings_the_tokens() {
    // 10, 10 more each second: 8 taken at T0, 4 asked 300 ms later wait until T0 + 1 s.
    let p = Policy::new(10, 1_000)
        .unwrap()
        .with_kind(Kind::SteppedBucket);
    let b = acquire(None, p, 8, T0).bucket;
    let d = acquire(Some(b), p, 4, T0 + 300);
    assert_eq!((d.verdict.allowed, d.verdict.retry_after_ms), (false, 700));
    assert!(!acquire(Some(b), p, 4, T0 + 999).verdict.allowed);
    assert!(acquire(Some(b), p, 4, T0 + 1_000).verdict.allowed);
}

#[test]
fn a_stepped_booking_keeps_what_its_step_leaves_over() {
    // Symfony's reserve() on 10 with 10 per second: 5 and 5 now, the next 5 at the step 1 s
    // after the first call, which leaves 5 for the call after it and nothing before it.
    let p = Policy::new(10, 1_000)
        .unwrap()
        .with_kind(Kind::SteppedBucket);
    let a = reserve(None, p, 5, u64::MAX, T0);
    let b = reserve(Some(a.bucket), p, 5, u64::MAX, T0 + 10);
    let c = reserve(Some(b.bucket), p, 5, u64::MAX, T0 + 20);
    assert_eq!(
        (a.verdict.wait_ms, b.verdict.wait_ms, c.verdict.wait_ms),
        (0, 0, 980)
    );
    assert_eq!(c.verdict.reserved, 5, "5 booked and not yet earned");
    let booked = c.bucket;
    assert!(!acquire(Some(booked), p, 1, T0 + 999).verdict.allowed);
    let d = acquire(Some(booked), p, 5, T0 + 1_000);
    assert_eq!((d.verdict.allowed, d.verdict.remaining), (true, 0));
    assert!(!acquire(Some(d.bucket), p, 1, T0 + 1_500).verdict.allowed);
}

#[test]
fn a_stepped_bucket_read_before_its_booked_step_has_nothing_whatever_the_clock() {
    let p = Policy::new(10, 1_000)
        .unwrap()
        .with_kind(Kind::SteppedBucket);
    let taken = acquire(None, p, 10, T0).bucket;
    let booked = reserve(Some(taken), p, 1, u64::MAX, T0 + 100).bucket;
    // 9 are left over at T0 + 1 s; none of them before, also on a clock read before the
    // booking was decided.
    for t in [T0 - 5_000, T0, T0 + 100, T0 + 999] {
        assert_eq!(booked.refill(&p, t).bucket.available(&p, t), 0, "at {t}");
    }
    assert_eq!(
        booked
            .refill(&p, T0 + 1_000)
            .bucket
            .available(&p, T0 + 1_000),
        9_000
    );
}

#[test]
fn a_stepped_debt_survives_a_change_to_the_token_bucket() {
    // (The amount is not stored: a call of another policy reads the old one's steps with
    // its own, here the default: the limit.)
    let stepped = Policy::new(2, 3_600_000)
        .unwrap()
        .with_kind(Kind::SteppedBucket);
    let b = acquire(None, stepped, 2, T0).bucket;
    let b = reserve(Some(b), stepped, 1, u64::MAX, T0).bucket;
    let tb = Policy::new(2, 3_600_000).unwrap();
    let d = acquire(Some(b), tb, 1, T0 + 1_000);
    assert!(!d.verdict.allowed, "the token owed is not forgotten");
    assert_eq!(
        d.bucket.stamp,
        T0 + 3_600_000,
        "nothing before the booked instant"
    );
    assert!(d.verdict.retry_after_ms >= 3_600_000 - 1_000);
}

#[test]
fn the_code_argument_reads_back() {
    let p = Policy::new(5, 1_000).unwrap();
    for q in [
        p,
        p.with_kind(Kind::SlidingWindow),
        p.with_kind(Kind::SteppedBucket).with_amount(3).unwrap(),
    ] {
        assert_eq!(p.with_code_arg(q.code_arg().as_bytes()), Some(q));
    }
    for bad in ["", "4", "3", "3:", "3:0", "0:1", "3:x", "33:1", "3:-1"] {
        assert_eq!(p.with_code_arg(bad.as_bytes()), None, "{bad:?}");
    }
}

proptest! {
    /// The property above with a clock that also runs back and the amount and the limit changed
    /// call by call: bounded by the largest limit and amount, each token counted at the
    /// instant it is used, a booked one at its booked instant, one taken at a clock read
    /// before the stamp at the stamp (what it takes was held there).
    #[test]
    fn a_stepped_bucket_never_lets_more_through_whatever_the_clock_amounts_and_limits(
        per_ms in 1u64..3_000,
        steps in proptest::collection::vec(
            (-1_500i64..700, 1u64..8, 0u64..8_000, 0u8..3, 1u64..10, 1u64..8),
            1..60,
        ),
    ) {
        let mut now = T0;
        let mut b: Option<Bucket> = None;
        let mut used: Vec<(i64, u64)> = vec![];
        let (mut maxl, mut maxa) = (0, 0);
        for (dt, cost, max_wait, how, amount, limit) in steps {
            now += dt;
            maxl = maxl.max(limit);
            maxa = maxa.max(amount.min(limit));
            let p = Policy::new(limit, per_ms).unwrap().with_kind(Kind::SteppedBucket)
                .with_amount(amount).unwrap();
            let cost = cost.min(limit);
            let d = match how {
                0 => acquire(b, p, cost, now),
                1 => reserve(b, p, cost, max_wait, now),
                _ => reserve(b, p, cost, u64::MAX, now),
            };
            if d.verdict.took() {
                let stamp = b.map_or(now, |b| b.stamp);
                used.push(((now + d.verdict.wait_ms as i64).max(stamp), cost));
            }
            b = Some(d.bucket);
        }
        used.sort();
        for i in 0..used.len() {
            let mut sum = 0;
            for j in i..used.len() {
                sum += used[j].1;
                let span = (used[j].0 - used[i].0) as u64;
                let bound = maxl + (span / per_ms + 1) * maxa;
                prop_assert!(sum <= bound, "{} tokens used in {} ms", sum, span);
            }
        }
    }
}

/// A token bucket's debt, however deep (a stepped debt up to MAX_BOOKED converted, forced
/// charges of the largest limit), counts at most MAX_USED milli-tokens, as a stepped bucket's
/// and a window's: what the scripts compute exactly.
#[test]
fn a_token_buckets_debt_counts_at_most_max_used() {
    let p = Policy::new(MAX_LIMIT, 1).unwrap();
    let deep = Bucket {
        tokens: 0,
        stamp: MAX_BOOKED,
        prev: T0 as u64 - 5,
        kind: Kind::TokenBucket,
    };
    assert_eq!(deep.reserved(&p, T0), MAX_USED.div_ceil(MILLI));
    // Below it, exact: 1 ms of 10^15 milli-tokens.
    let shallow = Bucket {
        stamp: T0 + 1,
        ..deep
    };
    assert_eq!(shallow.reserved(&p, T0), 1_000_000_000_000);
}
