//! Every policy against a straightforward model of it, on random sequences of calls (time
//! steps, backwards ones included, and costs): the verdicts must be equal, number for number.
//! The models keep whole tokens (windows) or exact fractions (the token bucket) in i128 and
//! find every wait by trying each millisecond in turn, so they share no arithmetic with the
//! closed forms of `bucket.rs` (the stepped bucket's model adds its steps one at a time).

use super::*;
use crate::core::decision::{decide, Ask};
use crate::core::lease::Slots;
use proptest::prelude::*;

/// allowed, remaining, retry_after, reset_after, next_token.
type Seen = (bool, u64, u64, u64, u64);

/// One limit as its policy's plain definition says.
#[derive(Debug, Clone)]
enum Model {
    /// Exact milli-tokens times `per` (no rounding at all), and the time they are counted at.
    /// A clock before that time earns nothing; a full bucket restarts its time at the call's.
    Tokens { x: i128, at: i128 },
    /// The current window (start, whole tokens used), if any.
    Fixed(Option<(i128, i128)>),
    /// The current window (start, tokens used in it, tokens used in the previous one).
    Sliding(Option<(i128, i128, i128)>),
    /// Milli-tokens held and the instant of the last step: `amount` tokens at each whole
    /// period after it, one step at a time, never past the limit; found full, the steps start
    /// again at the call.
    Stepped { t: i128, s: i128 },
}

struct Limits {
    limit: i128,
    per: i128,
    /// Tokens per step (stepped bucket).
    amount: i128,
}

impl Model {
    fn new(kind: Kind, l: &Limits, now: i128) -> Self {
        match kind {
            Kind::TokenBucket => Model::Tokens {
                x: l.limit * 1000 * l.per,
                at: now,
            },
            Kind::FixedWindow => Model::Fixed(None),
            Kind::SlidingWindow => Model::Sliding(None),
            Kind::SteppedBucket => Model::Stepped {
                t: l.limit * 1000,
                s: now,
            },
        }
    }

    /// Rolls the windows to `now` (a window ends at start + per; a sliding window whose
    /// successor also ended, or that used nothing, leaves nothing behind), earns the bucket's
    /// tokens; returns the time the state is evaluated at (never before its start).
    fn advance(&mut self, l: &Limits, now: i128) -> i128 {
        match self {
            Model::Tokens { x, at } => {
                if now >= *at {
                    *x = (*x + (now - *at) * l.limit * 1000).min(l.limit * 1000 * l.per);
                    *at = now;
                }
                now.max(*at)
            }
            Model::Fixed(w) => {
                if let Some((s, _)) = *w {
                    if now >= s + l.per {
                        *w = None;
                    }
                }
                w.map_or(now, |(s, _)| now.max(s))
            }
            Model::Sliding(w) => {
                if let Some((s, c, _)) = *w {
                    if now >= s + 2 * l.per || (now >= s + l.per && c == 0) {
                        *w = None;
                    } else if now >= s + l.per {
                        *w = Some((s + l.per, 0, c));
                    }
                }
                w.map_or(now, |(s, _, _)| now.max(s))
            }
            Model::Stepped { t, s } => {
                if now >= *s {
                    while *t < l.limit * 1000 && *s + l.per <= now {
                        *t += l.amount * 1000;
                        *s += l.per;
                    }
                    if *t >= l.limit * 1000 {
                        *t = l.limit * 1000;
                        *s = now;
                    }
                }
                now.max(*s)
            }
        }
    }

    /// Milli-tokens available at `t` (not before the evaluation time) if nothing is taken.
    fn available_at(&self, l: &Limits, t: i128) -> i128 {
        match *self {
            Model::Tokens { x, at } => {
                let x = (x + (t - at).max(0) * l.limit * 1000).min(l.limit * 1000 * l.per);
                x / l.per
            }
            Model::Fixed(w) => {
                let used = match w {
                    Some((s, u)) if t < s + l.per => u,
                    _ => 0,
                };
                (l.limit - used).max(0) * 1000
            }
            Model::Sliding(w) => {
                let used = match w {
                    // Symfony: floor(previous * (1 - elapsed / per) + current).
                    Some((s, c, p)) if t < s + l.per => c + p * (s + l.per - t) / l.per,
                    Some((s, c, _)) if t < s + 2 * l.per => c * (s + 2 * l.per - t) / l.per,
                    _ => 0,
                };
                (l.limit - used).max(0) * 1000
            }
            Model::Stepped { .. } => {
                let mut later = self.clone();
                later.advance(l, t);
                match later {
                    Model::Stepped { t, .. } => t,
                    _ => unreachable!(),
                }
            }
        }
    }

    fn take(&mut self, l: &Limits, tokens: i128, e: i128) {
        match self {
            Model::Tokens { x, .. } => *x -= tokens * 1000 * l.per,
            Model::Stepped { t, .. } => *t -= tokens * 1000,
            Model::Fixed(w) => *w = Some(w.map_or((e, tokens), |(s, u)| (s, u + tokens))),
            Model::Sliding(w) => {
                *w = Some(w.map_or((e, tokens, 0), |(s, c, p)| (s, c + tokens, p)))
            }
        }
    }

    /// Ms from `now` until `milli` are available, trying every millisecond from `e`.
    fn wait(&self, l: &Limits, milli: i128, e: i128, now: i128) -> u64 {
        let t = (e..=e + (l.limit + 3) * l.per + 1)
            .find(|&t| self.available_at(l, t) >= milli)
            .expect("every limit is whole again within limit + 3 periods");
        (t - now) as u64
    }

    fn call(&mut self, l: &Limits, now: i128, cost: i128) -> Seen {
        let e = self.advance(l, now);
        let allowed = self.available_at(l, e) >= cost * 1000;
        let retry = if allowed {
            0
        } else {
            self.wait(l, cost * 1000, e, now)
        };
        if allowed {
            self.take(l, cost, e);
        }
        let available = self.available_at(l, e);
        let cap = l.limit * 1000;
        let next = if available >= cap {
            0
        } else {
            self.wait(l, (available / 1000 + 1) * 1000, e, now)
        };
        (
            allowed,
            (available / 1000) as u64,
            retry,
            self.wait(l, cap, e, now),
            next,
        )
    }
}

fn kind_of(i: u8) -> Kind {
    Kind::ALL[i as usize % Kind::ALL.len()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Each policy's decisions equal its model's, step by step, whatever the spacing of the
    /// calls (backwards steps of the clock included) and their costs.
    #[test]
    fn every_policy_decides_as_its_model(
        kind in 0u8..4,
        limit in 1u64..8,
        per_ms in 1u64..300,
        amount in 1u64..10,
        steps in proptest::collection::vec((-400i64..900, 1u64..8), 1..80),
    ) {
        let kind = kind_of(kind);
        // The token bucket credits whole milli-tokens and moves its time base by the time they
        // took, rounded up to the millisecond (a fraction of a millisecond is withheld, never
        // minted: see the bucket's own properties). The exact model matches it where a
        // milli-token takes a whole number of milliseconds... or a millisecond earns whole
        // milli-tokens: when `per` divides the capacity.
        let per_ms = if kind == Kind::TokenBucket {
            let cap = limit * MILLI;
            (1..=per_ms).rev().find(|d| cap.is_multiple_of(*d)).unwrap()
        } else {
            per_ms
        };
        let p = Policy::new(limit, per_ms).unwrap().with_kind(kind).with_amount(amount).unwrap();
        let l = Limits { limit: limit as i128, per: per_ms as i128, amount: amount as i128 };
        let start = 1_000_000i64;
        let mut now = start;
        let mut model: Option<Model> = None;
        let mut stored: Option<Bucket> = None;
        for (i, (dt, cost)) in steps.into_iter().enumerate() {
            now = (now + dt).max(0);
            // A limit seen for the first time is full (a fresh window) at that call.
            let model = model.get_or_insert_with(|| Model::new(kind, &l, now as i128));
            let cost = cost.min(limit);
            let d = decide(stored, &Ask::new(p, cost, 0), Slots::default(), now);
            stored = Some(d.bucket);
            let v = d.verdict;
            let got: Seen = (v.allowed, v.remaining, v.retry_after_ms, v.reset_after_ms, v.next_token_ms);
            let want = model.call(&l, now as i128, cost as i128);
            prop_assert_eq!(got, want, "step {} at {} (cost {}), {:?}", i, now - start, cost, model);
        }
    }

    /// A clock read earlier than the latest one, for any state a sequence can reach, never
    /// finds more available than at the latest reading: going back mints nothing.
    #[test]
    fn a_clock_going_back_mints_nothing(
        kind in 0u8..4,
        limit in 1u64..8,
        per_ms in 1u64..300,
        amount in 1u64..10,
        steps in proptest::collection::vec((0i64..500, 0u64..8), 1..40),
        back in 1i64..2_000,
    ) {
        let p = Policy::new(limit, per_ms).unwrap().with_kind(kind_of(kind)).with_amount(amount).unwrap();
        let mut now = 1_000_000i64;
        let mut b: Option<Bucket> = None;
        for (dt, cost) in steps {
            now += dt;
            let d = decide(b, &Ask::new(p, cost.clamp(1, limit), 0), Slots::default(), now);
            b = Some(d.bucket);
        }
        let b = b.unwrap();
        let at_latest = b.refill(&p, now).bucket.available(&p, now);
        let earlier = now - back;
        let r = b.refill(&p, earlier);
        prop_assert!(r.bucket.available(&p, earlier) <= at_latest);
        prop_assert!(r.bucket.stamp >= b.stamp, "the stamp never moves back");
        // And no call at the earlier reading admits what the latest would deny.
        let cost = at_latest / MILLI + 1;
        if cost <= limit {
            let d = decide(Some(b), &Ask::new(p, cost, 0), Slots::default(), earlier);
            prop_assert!(!d.verdict.allowed);
        }
    }

    /// Another policy on an existing bucket: what it had available is what the new one has,
    /// exactly; nothing is minted, nothing used is forgotten.
    #[test]
    fn a_policy_change_keeps_what_is_available(
        from in 0u8..4, to in 0u8..4,
        limit in 1u64..8,
        per_ms in 1u64..300,
        amount in 1u64..10,
        steps in proptest::collection::vec((0i64..500, 1u64..8), 1..20),
        later in 0i64..1_000,
    ) {
        let p = Policy::new(limit, per_ms).unwrap().with_amount(amount).unwrap();
        let (old, new) = (p.with_kind(kind_of(from)), p.with_kind(kind_of(to)));
        let mut now = 1_000_000i64;
        let mut b: Option<Bucket> = None;
        for (dt, cost) in steps {
            now += dt;
            b = Some(decide(b, &Ask::new(old, cost.min(limit), 0), Slots::default(), now).bucket);
        }
        let now = now + later;
        let b = b.unwrap();
        let had = b.refill(&old, now).bucket.available(&old, now);
        let r = b.refill(&new, now).bucket;
        prop_assert_eq!(r.kind, new.kind());
        prop_assert_eq!(r.available(&new, now), had);
        prop_assert!(r.stamp >= b.stamp.min(now));
    }

    /// Any stored state of any policy (a damaged file may hold anything) decides without
    /// panicking, never beyond capacity.
    #[test]
    fn any_stored_window_decides_within_capacity(
        tokens in any::<u64>(), stamp in any::<i64>(), prev in any::<u64>(), code in 0i64..4,
        now in any::<i64>(), limit in 1u64..=MAX_LIMIT, per_ms in MIN_PER_MS..=MAX_PER_MS,
        asked in 0i64..4, amount in 1u64..=MAX_LIMIT,
    ) {
        let kind = Kind::from_code(code).unwrap();
        let p = Policy::new(limit, per_ms).unwrap().with_kind(Kind::from_code(asked).unwrap())
            .with_amount(amount).unwrap();
        let b = Bucket { tokens, stamp, prev, kind };
        let d = decide(Some(b), &Ask::new(p, 1, 0), Slots::default(), now);
        prop_assert!(d.bucket.available(&p, now) <= p.capacity());
        let _ = (d.bucket.full_at(&p), d.bucket.wait_for_next_token(&p, now));
    }
}

#[test]
fn a_fixed_window_starts_at_its_first_admission_and_resets_at_its_end() {
    let p = Policy::new(2, 1_000).unwrap().with_kind(Kind::FixedWindow);
    let ask = Ask::new(p, 1, 0);
    let mut b = None;
    let mut at = |t: i64| {
        let d = decide(b, &ask, Slots::default(), t);
        b = Some(d.bucket);
        let v = d.verdict;
        (v.allowed, v.remaining, v.retry_after_ms, v.reset_after_ms)
    };
    assert_eq!(at(500), (true, 1, 0, 1_000), "the window is [500, 1500)");
    assert_eq!(at(900), (true, 0, 0, 600));
    assert_eq!(at(1_499), (false, 0, 1, 1), "denied until the window's end");
    assert_eq!(
        at(1_500),
        (true, 1, 0, 1_000),
        "a new window from this admission"
    );
}

#[test]
fn a_fixed_window_lasts_the_period_it_was_started_with() {
    let short = Policy::new(5, 5_000).unwrap().with_kind(Kind::FixedWindow);
    let long = Policy::new(5, 10_000).unwrap().with_kind(Kind::FixedWindow);
    let take =
        |b: Option<Bucket>, p: &Policy, t: i64| decide(b, &Ask::new(*p, 1, 0), Slots::default(), t);
    let first = take(None, &short, 0);
    // Read with a longer period, it still ends at 5 s: a call at 7 s starts a new window...
    let seen = take(Some(first.bucket), &long, 1_000);
    assert_eq!(
        (seen.verdict.remaining, seen.verdict.reset_after_ms),
        (3, 4_000)
    );
    let next = take(Some(first.bucket), &long, 7_000);
    assert_eq!(next.verdict.remaining, 4, "a new window");
    // ... which lasts 10 s, also when read with the shorter period.
    let v = crate::core::decision::peek(Some(next.bucket), &short, 15_000);
    assert_eq!((v.remaining, v.reset_after_ms), (4, 2_000));
    assert_eq!(
        crate::core::decision::peek(Some(next.bucket), &short, 17_000).remaining,
        5
    );
}

#[test]
fn a_sliding_window_weighs_the_previous_window_as_symfony_does() {
    // Symfony's own example: 8 hits in the last window, 25 % into this one, 3 hits so far:
    // floor(0.75 * 8) + 3 = 9 of 10.
    let p = Policy::new(10, 1_000)
        .unwrap()
        .with_kind(Kind::SlidingWindow);
    let b = Bucket {
        tokens: 3_000,
        stamp: 0,
        prev: 8_000,
        kind: Kind::SlidingWindow,
    };
    assert_eq!(b.whole_tokens(&p, 250), 1);
    // 9 used: one more is admitted (10 used); the next waits until the previous window's
    // share is 5, floor(8 * (1000 - t) / 1000) <= 5, from t = 251 on.
    let d = decide(Some(b), &Ask::new(p, 1, 0), Slots::default(), 250);
    assert!(d.verdict.allowed);
    let d = decide(Some(d.bucket), &Ask::new(p, 1, 0), Slots::default(), 250);
    assert_eq!((d.verdict.allowed, d.verdict.retry_after_ms), (false, 1));
}
