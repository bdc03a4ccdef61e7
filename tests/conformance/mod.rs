//! The conformance suite every [`Store`] passes: one function per behaviour, generic over the
//! backend. A backend's test file instantiates it with `conformance_suite!(make_backend)`,
//! which declares one `#[test]` per behaviour. Each test gets a backend of its own (a fresh
//! file, a fresh key prefix), opens as many connections to it as it needs, and sets the time
//! through a manual clock (a backend that keeps time on its server ignores it, and is
//! instantiated without the tests marked `clock`). The stacks as shipped (tests/stacks.rs) pass
//! it too: where a worker's deny cache answers a repeated denial itself (`Source::DenyCache`),
//! the suite checks what that answer promises (the same verdict, reason and wait; `remaining`
//! 0) instead of every field of the store's.

#![allow(dead_code)]

use ratelimit::core::bucket::Policy;
use ratelimit::core::counters::Counters;
use ratelimit::core::decision::{Ask, Reason, Request, Source};
use ratelimit::core::lease::{LeaseId, LeaseToken};
use ratelimit::core::request::{Kind, Limit, Terms};
use ratelimit::core::subject::BucketKey;
use ratelimit::storage::{Clock, Store, StoreExt};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

pub const T0: i64 = 1_700_000_000_000;

/// A backend under test: opens connections to one shared store.
pub trait Backend: Sync {
    type S: Store;
    fn open(&self, clock: Clock) -> Self::S;
}

/// A clock the test moves by hand, shared by every connection of a test.
#[derive(Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(t: i64) -> Self {
        Self(Arc::new(AtomicI64::new(t)))
    }
    pub fn set(&self, t: i64) {
        self.0.store(t, Ordering::SeqCst);
    }
    pub fn clock(&self) -> Clock {
        let t = Arc::clone(&self.0);
        Arc::new(move || t.load(Ordering::SeqCst))
    }
}

pub fn key(n: u8) -> BucketKey {
    BucketKey {
        bucket: [n; 16],
        group: [n ^ 0xff; 16],
        previous: None,
    }
}

pub fn ask(limit: u64, per_ms: u64, inflight: u64) -> Ask {
    Ask::new(Policy::new(limit, per_ms).unwrap(), 1, inflight)
}

pub const NONE: Counters = Counters::ZERO;

/// Nothing carried: a fresh value for each call (a store clears what it writes).
pub fn none() -> Counters {
    Counters::ZERO
}

fn allowed<S: Store>(s: &mut S, k: &BucketKey, a: &Ask) -> bool {
    s.acquire(k, a, 60_000, &mut none())
        .unwrap()
        .verdict
        .allowed
}

/// Takes one slot of key 1 (5 per second, one slot) for `ttl_ms`; its token.
fn take_lease<S: Store>(s: &mut S, ttl_ms: u64) -> LeaseToken {
    s.acquire(&key(1), &ask(5, 1_000, 1), ttl_ms, &mut none())
        .unwrap()
        .lease
        .expect("a slot was free")
}

/// Declares one `#[test]` per behaviour of the suite for the backend `$make` builds.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@tests $make;
            the_limit_holds_across_threads_with_their_own_connections,
            state_survives_reopening,
            leases_limit_concurrency_and_expire,
            a_lease_is_released_by_its_token_from_another_connection,
            release_is_idempotent,
            an_expired_lease_is_not_released,
            a_token_naming_another_bucket_frees_nothing,
            reset_forgets_bucket_and_leases,
            peek_writes_nothing,
            a_backwards_clock_is_counted_and_mints_nothing,
            counts_of_reset_buckets_stay_in_the_totals,
            unwritten_counts_are_added_by_the_next_step,
            scopes_of_one_subject_are_separate_buckets,
            the_decision_vectors_hold,
            every_policy_decides_as_the_core,
            a_compound_call_with_mixed_policies_decides_as_the_core,
            a_shadow_scope_admits_would_be_denials_taking_nothing,
            a_replay_takes_nothing_is_flagged_and_holds_no_lease,
            a_replay_from_another_connection_takes_nothing,
            a_retry_while_the_lease_lives_is_in_progress_and_holds_nothing,
            a_retry_in_progress_in_a_shadow_scope_is_allowed_and_takes_nothing,
            after_its_replays_a_retry_is_charged,
            a_retry_with_other_terms_is_charged,
            a_fixed_id_never_gets_more_admissions_than_the_limit,
            a_retry_without_lease_ends_after_request_ttl,
            a_denied_call_is_not_remembered,
            a_different_request_id_is_charged,
            top_lists_the_buckets_with_the_most_denials,
            a_compound_denial_by_the_second_limit_charges_neither,
            a_compound_admission_charges_every_limit,
            a_compound_call_reports_the_tightest_limit,
            a_compound_call_of_one_limit_equals_acquire,
            a_compound_decision_is_counted_once,
            a_compound_slot_is_taken_in_the_first_bucket,
            a_compound_replay_takes_nothing,
            a_compound_retry_in_progress_holds_nothing,
            a_compound_retry_with_other_scopes_is_charged,
            the_reservation_vectors_hold,
            reservations_decide_as_the_core,
            concurrent_reservations_book_distinct_instants,
            a_read_between_a_booking_and_its_instant_is_no_clock_regression,
            a_refund_gives_tokens_back_up_to_the_capacity,
            a_refund_of_a_missing_bucket_leaves_it_missing,
            a_refund_lowers_a_window_and_leaves_an_ended_one_alone,
            a_refund_ends_a_repeated_denial,
            a_bucket_saturated_by_forced_charges_gets_nothing_back,
            refunds_are_the_cores,
            refunds_racing_admissions_lose_and_mint_nothing,
            a_key_called_with_other_periods_is_the_cores,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let backend = $make;
                conformance::$name(&backend);
            }
        )*
    };
}

pub fn the_limit_holds_across_threads_with_their_own_connections<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    b.open(clock.clock());
    let admitted: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let clock = clock.clone();
                s.spawn(move || {
                    let mut store = b.open(clock.clock());
                    (0..50)
                        .filter(|_| allowed(&mut store, &key(1), &ask(25, 86_400_000, 0)))
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 25);
    let stats = b.open(clock.clock()).stats(&mut none()).unwrap();
    assert_eq!(
        (stats.counters.allowed, stats.counters.denied_rate),
        (25, 375)
    );
}

pub fn state_survives_reopening<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut a = b.open(clock.clock());
    for _ in 0..3 {
        assert!(allowed(&mut a, &key(1), &ask(3, 60_000, 0)));
    }
    drop(a);
    let v = b
        .open(clock.clock())
        .acquire(&key(1), &ask(3, 60_000, 0), 60_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::Rate);
}

pub fn leases_limit_concurrency_and_expire<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = ask(100, 1_000, 2);
    let mut take = |t: i64| {
        clock.set(t);
        s.acquire(&key(1), &a, 2_000, &mut none()).unwrap()
    };
    assert!(take(T0).lease.is_some());
    assert!(take(T0 + 10).lease.is_some());
    let third = take(T0 + 20);
    assert_eq!(
        (third.verdict.reason, third.lease),
        (Reason::Inflight, None)
    );
    assert_eq!(third.verdict.retry_after_ms, 1_980);
    assert_eq!(take(T0 + 1_999).verdict.reason, Reason::Inflight);
    assert!(take(T0 + 2_000).verdict.allowed);
    let st = s.stats(&mut none()).unwrap();
    assert_eq!((st.counters.leases_expired, st.live_leases), (1, 2));
}

pub fn a_lease_is_released_by_its_token_from_another_connection<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut holder = b.open(clock.clock());
    let token = take_lease(&mut holder, 60_000);
    // The token alone, as text, is all another process (or host) needs.
    let token = LeaseToken::parse(token.to_string().as_bytes()).unwrap();
    let mut other = b.open(clock.clock());
    assert_eq!(other.release(&[token], &mut none()).unwrap(), 1);
    assert!(allowed(&mut holder, &key(1), &ask(5, 1_000, 1)));
}

pub fn release_is_idempotent<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let lease = take_lease(&mut s, 60_000);
    assert_eq!(s.release(&[lease], &mut none()).unwrap(), 1);
    assert_eq!(s.release(&[lease], &mut none()).unwrap(), 0);
    assert!(allowed(&mut s, &key(1), &ask(5, 1_000, 1)));
}

pub fn an_expired_lease_is_not_released<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let lease = take_lease(&mut s, 1_000);
    clock.set(T0 + 1_000);
    assert_eq!(s.release(&[lease], &mut none()).unwrap(), 0);
}

pub fn a_token_naming_another_bucket_frees_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let lease = take_lease(&mut s, 60_000);
    let forged = LeaseToken {
        id: lease.id,
        key: key(2),
    };
    let unknown = LeaseToken {
        id: LeaseId([0x5a; 16]),
        key: lease.key,
    };
    assert_eq!(s.release(&[forged, unknown], &mut none()).unwrap(), 0);
    assert_eq!(
        s.acquire(&key(1), &ask(5, 1_000, 1), 60_000, &mut none())
            .unwrap()
            .verdict
            .reason,
        Reason::Inflight
    );
}

pub fn reset_forgets_bucket_and_leases<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    assert!(allowed(&mut s, &key(1), &ask(1, 60_000, 1)));
    assert!(s.reset(&key(1), &mut none()).unwrap());
    assert!(!s.reset(&key(1), &mut none()).unwrap());
    assert!(allowed(&mut s, &key(1), &ask(1, 60_000, 1)));
    let st = s.stats(&mut none()).unwrap();
    assert_eq!((st.entries, st.live_leases), (1, 1));
}

pub fn peek_writes_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let v = s
        .peek(&key(1), &Policy::new(5, 1_000).unwrap(), &mut none())
        .unwrap();
    assert_eq!((v.allowed, v.remaining), (true, 5));
    let st = s.stats(&mut none()).unwrap();
    assert_eq!((st.entries, st.counters.allowed), (0, 0));
}

pub fn a_backwards_clock_is_counted_and_mints_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = ask(1, 1_000, 0);
    assert!(allowed(&mut s, &key(1), &a));
    clock.set(T0 - 3_600_000);
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert_eq!(v.reason, Reason::Rate);
    clock.set(T0 + 999);
    assert!(!allowed(&mut s, &key(1), &a), "the stamp moved back");
    assert_eq!(s.stats(&mut none()).unwrap().counters.clock_regressions, 1);
}

pub fn counts_of_reset_buckets_stay_in_the_totals<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let slow = ask(1, 3_600_000, 0);
    assert!(allowed(&mut s, &key(1), &slow));
    assert!(!allowed(&mut s, &key(1), &slow));
    assert!(s.reset(&key(1), &mut none()).unwrap());
    let st = s.stats(&mut none()).unwrap();
    assert_eq!(
        (st.counters.allowed, st.counters.denied_rate, st.entries),
        (1, 1, 0)
    );
}

pub fn unwritten_counts_are_added_by_the_next_step<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    // The breaker's and the fallback's counts reach whichever store decides next.
    let carried = Counters {
        unavailable: 3,
        redis_errors: 1,
        fallback_switches: 2,
        fallback_decisions: 4,
        ..NONE
    };
    let mut carry = carried;
    s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut carry)
        .unwrap();
    assert_eq!(carry, NONE, "a step clears what it wrote");
    s.reset(&key(9), &mut carried.clone()).unwrap();
    let c = b.open(clock.clock()).stats(&mut none()).unwrap().counters;
    assert_eq!((c.unavailable, c.allowed), (6, 1));
    assert_eq!(
        (c.redis_errors, c.fallback_switches, c.fallback_decisions),
        (2, 4, 8)
    );
}

pub fn scopes_of_one_subject_are_separate_buckets<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let login = key(1);
    let api = BucketKey {
        bucket: [2; 16],
        group: login.group,
        previous: None,
    };
    assert!(allowed(&mut s, &login, &ask(1, 60_000, 0)));
    assert!(allowed(&mut s, &api, &ask(1, 60_000, 0)));
    assert!(!allowed(&mut s, &login, &ask(1, 60_000, 0)));
}

/// The pressure view: buckets with denials only, most first, each with its own counts and
/// leases, the same from another connection once written, and every denial counted once.
pub fn top_lists_the_buckets_with_the_most_denials<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let hourly = ask(1, 3_600_000, 0);
    let mut decide =
        |k: u8, a: &Ask, times: usize| (0..times).filter(|_| allowed(&mut s, &key(k), a)).count();
    assert_eq!(decide(1, &hourly, 6), 1);
    assert_eq!(decide(2, &hourly, 3), 1);
    assert_eq!(decide(3, &ask(100, 1_000, 0), 4), 4);
    assert_eq!(decide(4, &ask(100, 1_000, 1), 4), 1, "one slot, held");
    let top = s.top(10, &mut none()).unwrap();
    let got: Vec<_> = top
        .iter()
        .map(|v| {
            (
                v.bucket,
                v.allowed,
                v.denied_rate,
                v.denied_inflight,
                v.live_leases,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (key(1).bucket, 1, 5, 0, 0),
            (key(4).bucket, 1, 0, 3, 1),
            (key(2).bucket, 1, 2, 0, 0),
        ]
    );
    let hot = &top[0];
    assert_eq!((hot.tokens_milli, hot.stamp_ms), (0, T0));
    assert_eq!(hot.full_at_ms, T0 + 3_600_000);
    assert!(
        (T0 - 100..=T0).contains(&hot.used_at_ms),
        "{}",
        hot.used_at_ms
    );
    let st = s.stats(&mut none()).unwrap().counters;
    let listed: u64 = top.iter().map(|v| v.denials()).sum();
    assert_eq!(listed, st.denied_rate + st.denied_inflight);
    assert_eq!(s.top(2, &mut none()).unwrap(), top[..2]);
    s.flush(&mut none()).unwrap();
    assert_eq!(
        b.open(clock.clock()).top(10, &mut none()).unwrap(),
        top,
        "written for every process"
    );
}

/// tests/vectors/decisions.tsv, step by step, each case on a bucket of its own: what every
/// backend must answer (the same file will check a Redis script against the core).
pub fn the_decision_vectors_hold<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut cases = std::collections::HashMap::new();
    let mut steps = 0;
    for v in vectors::decisions() {
        let n = cases.len() as u8 + 1;
        let k = *cases.entry(v.case.clone()).or_insert_with(|| key(n));
        clock.set(T0 + v.t);
        let policy = v.policy;
        let a = Ask::new(policy, v.cost, v.inflight);
        let got = s.acquire(&k, &a, v.ttl_ms, &mut none()).unwrap().verdict;
        if got.source == Source::DenyCache {
            assert_eq!(
                (got.allowed, got.reason.as_str(), got.retry_after_ms),
                (v.expect.0, v.expect.1.as_str(), v.expect.3),
                "{v:?}"
            );
            assert_eq!(got.remaining, 0, "a deny cache's denial: {v:?}");
            steps += 1;
            continue;
        }
        let got = (
            got.allowed,
            got.reason.as_str().to_string(),
            got.remaining,
            got.retry_after_ms,
            got.reset_after_ms,
            got.next_token_ms,
        );
        assert_eq!(got, v.expect, "{v:?}");
        steps += 1;
    }
    assert!(
        steps >= 20 && cases.len() >= 6,
        "{steps} steps in {} cases",
        cases.len()
    );
}

/// A small deterministic generator (a 64-bit LCG): the same sequences on every backend.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// A verdict's numbers, as compared with the core's.
fn numbers(v: &ratelimit::core::decision::Verdict) -> (bool, Reason, u64, u64, u64, u64) {
    (
        v.allowed,
        v.reason,
        v.remaining,
        v.retry_after_ms,
        v.reset_after_ms,
        v.next_token_ms,
    )
}

/// A deny cache's denial (`got`) checked against the core's verdict on the store's state
/// (`want`): a `rate` denial the store would give too, `remaining` 0, and a wait that ends no
/// later than the store's (the cache's wait is the one it was told for a cost at most this
/// call's, so it may end sooner; never later, and never an end the store would not have).
fn deny_cache_answer_is_within_the_core(
    got: &ratelimit::core::decision::Verdict,
    want: &ratelimit::core::decision::Verdict,
    at: &str,
) {
    assert_eq!(
        (got.allowed, got.reason, want.allowed, want.reason),
        (false, Reason::Rate, false, Reason::Rate),
        "a deny cache's denial is the store's: {at}"
    );
    assert_eq!(got.remaining, 0, "a deny cache's denial: {at}");
    assert!(
        got.retry_after_ms > 0 && got.retry_after_ms <= want.retry_after_ms,
        "a deny cache's wait {} within the store's {}: {at}",
        got.retry_after_ms,
        want.retry_after_ms
    );
}

/// Random calls (time steps forward and back, costs, a peek now and then, a change to a
/// window policy now and then) on each policy: the store answers exactly what the core
/// computes step by step (the Redis scripts are the core's arithmetic in Lua).
///
/// A store may leave a denial unwritten (SQLite's snapshot) or write it (Redis, with its
/// count); on a stack, a worker's deny cache may answer it without the store. A window's state does not depend on it (see `decision::denial_writes`); a token
/// bucket's does, within what the rounding withholds (a refill credits whole milli-tokens)
/// and when the clock goes back over a full bucket (its time restarts at the call's): both
/// answers are exact by their own path, so the token bucket runs here with a clock that only
/// goes forward and a `per` that divides its capacity (no rounding).
pub fn every_policy_decides_as_the_core<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{Bucket, Kind};
    use ratelimit::core::decision::{decide, peek};
    use ratelimit::core::lease::Slots;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut rng = Lcg(23);
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let k = key(40 + n as u8);
        let limit = 1 + rng.below(5);
        let per = match kind {
            Kind::TokenBucket => {
                [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500][rng.below(15) as usize]
            }
            _ => 1 + rng.below(900),
        };
        // A stepped bucket's amount, 1 to past the limit (drawn for it alone: the other
        // policies' sequences stay as they were).
        let amount = if kind == Kind::SteppedBucket {
            1 + rng.below(limit + 1)
        } else {
            limit
        };
        let mut kind = kind;
        let mut now = T0;
        let mut state: Option<Bucket> = None;
        for step in 0..150 {
            now += match kind {
                Kind::TokenBucket => rng.below(400) as i64,
                _ => rng.below(700) as i64 - 150,
            };
            clock.set(now);
            if kind != Kind::TokenBucket && rng.below(20) == 0 {
                kind = Kind::ALL[1 + rng.below(2) as usize];
            }
            let p = Policy::new(limit, per)
                .unwrap()
                .with_kind(kind)
                .with_amount(amount)
                .unwrap();
            if rng.below(8) == 0 {
                let got = s.peek(&k, &p, &mut none()).unwrap();
                assert_eq!(numbers(&got), numbers(&peek(state, &p, now)), "peek {step}");
                continue;
            }
            let a = Ask::new(p, 1 + rng.below(limit), 0);
            let want = decide(state, &a, Slots::default(), now);
            let got = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
            if got.source == Source::DenyCache {
                // Answered by the worker's deny cache: the store never saw the call, so the
                // state stays as it was (a window's roll too), and the answer is what the
                // cache promises (see `deny_cache_answer_is_within_the_core`).
                deny_cache_answer_is_within_the_core(
                    &got,
                    &want.verdict,
                    &format!("{kind:?} step {step}"),
                );
                continue;
            }
            assert_eq!(
                numbers(&got),
                numbers(&want.verdict),
                "{kind:?} step {step}"
            );
            state = Some(want.bucket);
        }
    }
}

/// A compound call whose limits count in different ways: all or nothing, each limit's own
/// verdict and the combined one exactly the core's.
pub fn a_compound_call_with_mixed_policies_decides_as_the_core<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{Bucket, Kind};
    use ratelimit::core::compound::decide_all;
    use ratelimit::core::lease::Slots;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [
        key(50),
        BucketKey {
            bucket: [51; 16],
            ..key(50)
        },
        BucketKey {
            bucket: [52; 16],
            ..key(50)
        },
    ];
    let policies = [
        Policy::new(3, 1_000)
            .unwrap()
            .with_kind(Kind::SlidingWindow),
        Policy::new(5, 3_000).unwrap().with_kind(Kind::FixedWindow),
        Policy::new(8, 10_000).unwrap(),
    ];
    let mut rng = Lcg(7);
    let mut state: Vec<Option<Bucket>> = vec![None; 3];
    let mut now = T0;
    let mut admitted = 0;
    for step in 0..120 {
        now += rng.below(400) as i64 - 50;
        clock.set(now);
        let cost = 1 + rng.below(2);
        let asks: Vec<Ask> = policies.iter().map(|p| Ask::new(*p, cost, 0)).collect();
        let want = decide_all(&state, &asks, Slots::default(), now);
        let got = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
        assert_eq!(numbers(&got.verdict), numbers(&want.verdict), "step {step}");
        assert_eq!(got.reported, want.reported, "step {step}");
        let each: Vec<_> = got.each.iter().map(numbers).collect();
        let want_each: Vec<_> = want.each.iter().map(numbers).collect();
        assert_eq!(each, want_each, "step {step}");
        admitted += u64::from(got.verdict.allowed);
        state = want.buckets.into_iter().map(Some).collect();
    }
    assert!(
        admitted > 10 && admitted < 110,
        "{admitted} admitted: a sequence that tests little"
    );
}

/// tests/vectors/reservations.tsv, step by step, each case on a bucket of its own: what every
/// backend books (the core's unit test reads the same file).
pub fn the_reservation_vectors_hold<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut cases = std::collections::HashMap::new();
    let mut steps = 0;
    for line in include_str!("../vectors/reservations.tsv").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 13, "bad vector line {line:?}");
        let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("{line:?}"));
        let k = cases.len() as u8 + 80;
        let k = *cases.entry(f[0]).or_insert_with(|| key(k));
        clock.set(T0 + f[4].parse::<i64>().unwrap());
        let plain = Ask::new(Policy::from_vector(n(1), n(2), f[3]).unwrap(), n(5), 0);
        let a = match f[6] {
            "-" => plain,
            "inf" => plain.reserving(u64::MAX),
            _ => plain.reserving(n(6)),
        };
        let v = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
        if v.source == Source::DenyCache {
            // A plain call's repeated denial, answered by a worker's deny cache: its promise.
            assert_eq!(
                (v.allowed, v.reason, f[8]),
                (false, Reason::Rate, "rate"),
                "{line:?}"
            );
            steps += 1;
            continue;
        }
        let got = [
            u64::from(v.allowed).to_string(),
            v.reason.as_str().to_string(),
            v.remaining.to_string(),
            v.retry_after_ms.to_string(),
            v.wait_ms.to_string(),
            v.reserved.to_string(),
        ];
        assert_eq!(got.as_slice(), &f[7..], "{line:?}");
        steps += 1;
    }
    assert!(steps >= 20 && cases.len() >= 4, "{steps} steps");
}

pub mod vectors {
    #[derive(Debug)]
    pub struct Step {
        pub case: String,
        pub limit: u64,
        pub per_ms: u64,
        /// The limit, its period and its policy (`policy` column: a name, and for a stepped
        /// bucket its amount after a colon).
        pub policy: ratelimit::core::bucket::Policy,
        pub inflight: u64,
        pub ttl_ms: u64,
        pub t: i64,
        pub cost: u64,
        pub expect: (bool, String, u64, u64, u64, u64),
    }

    pub fn decisions() -> Vec<Step> {
        include_str!("../vectors/decisions.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 14, "bad vector line {l:?}");
                let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("{l:?}"));
                Step {
                    case: f[0].to_string(),
                    limit: n(1),
                    per_ms: n(2),
                    policy: ratelimit::core::bucket::Policy::from_vector(n(1), n(2), f[3])
                        .unwrap_or_else(|| panic!("{l:?}")),
                    inflight: n(4),
                    ttl_ms: n(5),
                    t: f[6].parse().unwrap(),
                    cost: n(7),
                    expect: (f[8] == "1", f[9].to_string(), n(10), n(11), n(12), n(13)),
                }
            })
            .collect()
    }
}

/// `a` (a call of `ratelimit_acquire()` in scope "s") with request id `name`, remembered
/// `ttl_ms`, replayed at most 3 times.
pub fn with_request(a: Ask, name: u8, ttl_ms: u64) -> Ask {
    with_replays(a, name, ttl_ms, 3)
}

pub fn with_replays(a: Ask, name: u8, ttl_ms: u64, replays: u32) -> Ask {
    let limit = Limit {
        scope: "s",
        policy: a.policy,
        cost: a.cost,
    };
    Ask {
        request: Some(Request {
            name: [name; 16],
            ttl_ms,
            terms: Terms::of(Kind::Acquire, &[limit], a.max_inflight),
            replays,
        }),
        ..a
    }
}

/// `asks` (a call of `ratelimit_acquire_all()` in `scopes`) with request id `name` on the
/// first, remembered `ttl_ms`, replayed at most 3 times.
pub fn with_request_all(asks: &[Ask], scopes: &[&str], name: u8, ttl_ms: u64) -> Vec<Ask> {
    let limits: Vec<Limit<'_>> = asks
        .iter()
        .zip(scopes)
        .map(|(a, scope)| Limit {
            scope,
            policy: a.policy,
            cost: a.cost,
        })
        .collect();
    let mut out = asks.to_vec();
    out[0].request = Some(Request {
        name: [name; 16],
        ttl_ms,
        terms: Terms::of(Kind::AcquireAll, &limits, asks[0].max_inflight),
        replays: 3,
    });
    out
}

fn shadow(a: Ask) -> Ask {
    Ask { dry_run: true, ..a }
}

/// A shadow scope: every decision charged as for real, denials answered allowed with their
/// reason, never a lease for one, counted as dry_run_denied (also when decided from what was
/// read without the write lock).
pub fn a_shadow_scope_admits_would_be_denials_taking_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = shadow(ask(2, 60_000, 0));
    let mut reasons = Vec::new();
    for _ in 0..5 {
        let got = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
        assert!(got.verdict.allowed);
        reasons.push((got.verdict.reason, got.verdict.dry_run));
    }
    assert_eq!(
        reasons,
        [
            (Reason::Ok, false),
            (Reason::Ok, false),
            (Reason::Rate, true),
            (Reason::Rate, true),
            (Reason::Rate, true)
        ]
    );
    // Charged as for real: the same bucket, in real mode, is empty.
    assert!(!allowed(&mut s, &key(1), &ask(2, 60_000, 0)));
    // Slots: the shadow admission keeps its lease, the would-be denial gets none.
    let a = shadow(ask(5, 60_000, 1));
    let first = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap();
    assert!(first.verdict.took() && first.lease.is_some());
    let second = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap();
    assert_eq!(
        (second.verdict.allowed, second.verdict.reason, second.lease),
        (true, Reason::Inflight, None)
    );
    assert_eq!(
        s.peek(&key(2), &a.policy, &mut none()).unwrap().remaining,
        4,
        "one token taken"
    );
    s.flush(&mut none()).unwrap();
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!(
        (
            c.dry_run_denied,
            c.denied_rate,
            c.denied_inflight,
            c.allowed
        ),
        (4, 4, 1, 3)
    );
    assert_eq!(s.stats(&mut none()).unwrap().live_leases, 1);
}

/// The same request id and terms again, no lease live: a replay, allowed and flagged, taking
/// nothing and holding no lease, its numbers the bucket's as it stands now; counted as a
/// retry, not as an admission.
pub fn a_replay_takes_nothing_is_flagged_and_holds_no_lease<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = with_request(ask(3, 60_000, 0), 9, 60_000);
    let first = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert!(first.verdict.took() && !first.verdict.replay);
    assert_eq!(first.verdict.remaining, 2);
    // Another call takes a token: the replay tells the bucket as it stands, not as it was.
    assert!(allowed(&mut s, &key(1), &ask(3, 60_000, 0)));
    clock.set(T0 + 1_000);
    let again = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert_eq!(
        (
            again.verdict.allowed,
            again.verdict.reason,
            again.verdict.replay
        ),
        (true, Reason::Ok, true)
    );
    assert_eq!(
        (
            again.verdict.source,
            again.lease,
            again.verdict.retry_after_ms
        ),
        (Source::Replay, None, 0)
    );
    assert!(!again.verdict.took());
    let now = s.peek(&key(1), &a.policy, &mut none()).unwrap();
    assert_eq!(
        (again.verdict.remaining, again.verdict.reset_after_ms),
        (now.remaining, now.reset_after_ms),
        "the bucket as it stands"
    );
    assert_eq!(now.remaining, 1, "nothing taken by the replay");
    // With a lease: once the first released it, a replay takes no slot either.
    let a = with_request(ask(5, 60_000, 1), 8, 60_000);
    let first = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap();
    assert_eq!(s.release(&[first.lease.unwrap()], &mut none()).unwrap(), 1);
    let again = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap();
    assert!(again.verdict.replay && again.lease.is_none());
    let st = s.stats(&mut none()).unwrap();
    assert_eq!(
        (st.counters.allowed, st.counters.retries, st.live_leases),
        (3, 2, 0)
    );
}

pub fn a_replay_from_another_connection_takes_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut one = b.open(clock.clock());
    let mut two = b.open(clock.clock());
    let a = with_request(ask(1, 60_000, 0), 9, 60_000);
    let first = one.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert!(first.verdict.took());
    clock.set(T0 + 500);
    let again = two.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert!(again.verdict.allowed && again.verdict.replay, "{again:?}");
    assert_eq!(again.verdict.remaining, 0, "the bucket is empty");
    // Without the id (or another one), the empty bucket denies.
    assert!(!allowed(&mut two, &key(1), &ask(1, 60_000, 0)));
}

/// While the first admission's lease lives, a retry with the same terms is denied
/// `in_progress` until the lease ends, takes nothing and holds nothing (the slot stays the
/// first's); once the lease is released or expired, the retry is a replay.
pub fn a_retry_while_the_lease_lives_is_in_progress_and_holds_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = with_request(ask(5, 60_000, 1), 9, 60_000);
    let first = s.acquire(&key(1), &a, 10_000, &mut none()).unwrap();
    assert!(first.verdict.took() && first.lease.is_some());
    clock.set(T0 + 2_000);
    for _ in 0..3 {
        let r = s.acquire(&key(1), &a, 10_000, &mut none()).unwrap();
        assert_eq!(
            (
                r.verdict.allowed,
                r.verdict.reason,
                r.verdict.replay,
                r.lease
            ),
            (false, Reason::InProgress, false, None)
        );
        assert_eq!(
            r.verdict.retry_after_ms, 8_000,
            "until the first lease ends"
        );
        assert_eq!(r.verdict.remaining, 4, "the bucket as it stands");
    }
    // Nothing to release: the slot stays held, another id is denied `inflight`.
    assert_eq!(s.release(&[], &mut none()).unwrap(), 0);
    let other = s
        .acquire(
            &key(1),
            &with_request(ask(5, 60_000, 1), 7, 60_000),
            10_000,
            &mut none(),
        )
        .unwrap();
    assert_eq!(other.verdict.reason, Reason::Inflight);
    assert_eq!(
        s.peek(&key(1), &a.policy, &mut none()).unwrap().remaining,
        4
    );
    // Expired (its holder was killed): now a replay, still without a lease.
    clock.set(T0 + 10_000);
    let r = s.acquire(&key(1), &a, 10_000, &mut none()).unwrap();
    assert!(r.verdict.replay && r.verdict.allowed && r.lease.is_none());
    s.flush(&mut none()).unwrap();
    let st = s.stats(&mut none()).unwrap();
    assert_eq!(
        (
            st.counters.denied_in_progress,
            st.counters.retries,
            st.counters.allowed
        ),
        (3, 1, 1)
    );
}

pub fn a_retry_in_progress_in_a_shadow_scope_is_allowed_and_takes_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = shadow(with_request(ask(5, 60_000, 1), 9, 60_000));
    assert!(s
        .acquire(&key(1), &a, 10_000, &mut none())
        .unwrap()
        .verdict
        .took());
    let r = s.acquire(&key(1), &a, 10_000, &mut none()).unwrap();
    assert_eq!(
        (
            r.verdict.allowed,
            r.verdict.reason,
            r.verdict.dry_run,
            r.lease
        ),
        (true, Reason::InProgress, true, None)
    );
    assert_eq!(
        s.peek(&key(1), &a.policy, &mut none()).unwrap().remaining,
        4
    );
    s.flush(&mut none()).unwrap();
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.denied_in_progress, c.dry_run_denied), (1, 1));
}

/// After `replays` replays the record is forgotten: the next retry is charged like any call
/// (and remembered anew).
pub fn after_its_replays_a_retry_is_charged<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = with_replays(ask(10, 3_600_000, 0), 9, 60_000, 2);
    let mut seen = Vec::new();
    for _ in 0..7 {
        let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
        seen.push((v.replay, v.remaining));
    }
    assert_eq!(
        seen,
        [
            (false, 9),
            (true, 9),
            (true, 9),
            (false, 8),
            (true, 8),
            (true, 8),
            (false, 7)
        ]
    );
    // No replay at all: every retry is charged.
    let a = with_replays(ask(10, 3_600_000, 0), 8, 60_000, 0);
    for want in [9, 8, 7] {
        let v = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap().verdict;
        assert_eq!((v.replay, v.remaining), (false, want));
    }
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.allowed, c.retries), (6, 4));
}

/// A retry that asks for something else than what was admitted (another cost, limit, period,
/// slot count, or another kind of call) is charged afresh, never free, even while the first
/// one's lease lives; admitted, it replaces the record.
pub fn a_retry_with_other_terms_is_charged<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let base = ask(100, 3_600_000, 0);
    let first = s
        .acquire(&key(1), &with_request(base, 9, 60_000), 60_000, &mut none())
        .unwrap();
    assert_eq!(first.verdict.remaining, 99);
    let costly = Ask { cost: 10, ..base };
    let other_limit = ask(101, 3_600_000, 0);
    let other_per = ask(100, 3_600_001, 0);
    let with_slot = ask(100, 3_600_000, 5);
    let mut left = 99;
    for (what, a, cost) in [
        ("cost", costly, 10),
        ("limit", other_limit, 1),
        ("per", other_per, 1),
        ("inflight", with_slot, 1),
    ] {
        let v = s
            .acquire(&key(1), &with_request(a, 9, 60_000), 60_000, &mut none())
            .unwrap()
            .verdict;
        assert!(v.took() && !v.replay, "{what}: {v:?}");
        left -= cost;
        assert_eq!(
            s.peek(&key(1), &base.policy, &mut none())
                .unwrap()
                .remaining,
            left,
            "{what} charged"
        );
    }
    // The record now holds the last call's terms: the first terms are charged again.
    let v = s
        .acquire(&key(1), &with_request(base, 9, 60_000), 60_000, &mut none())
        .unwrap()
        .verdict;
    assert!(v.took() && v.remaining == left - 1, "{v:?}");
    // A compound call with the same id in the same bucket is another kind of call: charged.
    let all = with_request_all(&[base], &["s"], 9, 60_000);
    let v = s
        .acquire_all(&[key(1)], &all, 60_000, &mut none())
        .unwrap()
        .verdict;
    assert!(v.took() && !v.replay && v.remaining == left - 2, "{v:?}");
    // Another cost while the first lease lives: charged (denied `inflight` here, not in
    // progress, and never free).
    let a = with_request(ask(5, 60_000, 1), 8, 60_000);
    assert!(s
        .acquire(&key(2), &a, 60_000, &mut none())
        .unwrap()
        .verdict
        .took());
    let costly = with_request(
        Ask {
            cost: 2,
            ..ask(5, 60_000, 1)
        },
        8,
        60_000,
    );
    let v = s
        .acquire(&key(2), &costly, 60_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::Inflight);
    assert_eq!(s.stats(&mut none()).unwrap().counters.retries, 0);
}

/// One request id sent over and over (the attack of issue 20): it never gets more admissions
/// than the limit allows over the time it runs, nor two in flight with `inflight: 1`.
pub fn a_fixed_id_never_gets_more_admissions_than_the_limit<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = with_request(ask(5, 3_600_000, 0), 9, 60_000);
    let (mut took, mut replays) = (0, 0);
    for _ in 0..500 {
        let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
        took += u32::from(v.took());
        replays += u32::from(v.replay);
    }
    assert_eq!(
        (took, replays),
        (5, 15),
        "5 admissions, each replayed 3 times"
    );
    // Spread over two periods of a limit of 5 per 10 s: at most 5 + 5 * 20 / 10.
    let a = with_request(ask(5, 10_000, 0), 8, 60_000);
    let mut took = 0;
    for i in 0..500 {
        clock.set(T0 + i * 40);
        took += u32::from(
            s.acquire(&key(2), &a, 60_000, &mut none())
                .unwrap()
                .verdict
                .took(),
        );
    }
    assert!(took <= 15, "{took} admissions");
    // inflight 1, lease held: every retry is in progress, never a second slot.
    clock.set(T0);
    let a = with_request(ask(5, 3_600_000, 1), 7, 60_000);
    let mut leases = 0;
    for _ in 0..50 {
        leases += u32::from(
            s.acquire(&key(3), &a, 60_000, &mut none())
                .unwrap()
                .lease
                .is_some(),
        );
    }
    assert_eq!(leases, 1);
    assert_eq!(
        s.peek(&key(3), &a.policy, &mut none()).unwrap().remaining,
        4
    );
}

pub fn a_retry_without_lease_ends_after_request_ttl<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = with_request(ask(5, 86_400_000, 0), 9, 2_000);
    s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    clock.set(T0 + 1_999);
    assert_eq!(
        s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        4
    );
    clock.set(T0 + 2_000);
    assert_eq!(
        s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        3
    );
    assert_eq!(s.stats(&mut none()).unwrap().counters.retries, 1);
}

/// A denial is not remembered: its retry is decided afresh, and admitted once tokens are back.
pub fn a_denied_call_is_not_remembered<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    assert!(allowed(&mut s, &key(1), &ask(1, 1_000, 0)));
    let a = with_request(ask(1, 1_000, 0), 9, 60_000);
    let denied = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert_eq!(denied.verdict.reason, Reason::Rate);
    clock.set(T0 + 1_000);
    let again = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert!(again.verdict.took());
    // A shadow admission of a would-be denial is not remembered either.
    let a = shadow(with_request(ask(1, 60_000, 0), 8, 60_000));
    assert!(allowed(&mut s, &key(2), &ask(1, 60_000, 0)));
    let first = s.acquire(&key(2), &a, 60_000, &mut none()).unwrap();
    assert!(first.verdict.dry_run);
    assert!(
        s.acquire(&key(2), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .dry_run
    );
    s.flush(&mut none()).unwrap();
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.retries, c.dry_run_denied), (0, 2));
}

pub fn a_different_request_id_is_charged<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let one = with_request(ask(2, 60_000, 0), 1, 60_000);
    let two = with_request(ask(2, 60_000, 0), 2, 60_000);
    assert_eq!(
        s.acquire(&key(1), &one, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        1
    );
    assert_eq!(
        s.acquire(&key(1), &two, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        0
    );
    assert_eq!(
        s.acquire(
            &key(1),
            &with_request(ask(2, 60_000, 0), 3, 60_000),
            60_000,
            &mut none()
        )
        .unwrap()
        .verdict
        .reason,
        Reason::Rate
    );
    // The same name in another bucket is another request.
    assert_eq!(
        s.acquire(&key(2), &one, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        1
    );
}

/// Bucket `n` of the one subject every compound test uses: one group (one hash tag), as every
/// bucket of a subject has.
pub fn subject_key(n: u8) -> BucketKey {
    BucketKey {
        bucket: [n; 16],
        group: [0x5a; 16],
        previous: None,
    }
}

fn peek_remaining<S: Store>(s: &mut S, k: &BucketKey, limit: u64, per_ms: u64) -> u64 {
    s.peek(k, &Policy::new(limit, per_ms).unwrap(), &mut none())
        .unwrap()
        .remaining
}

pub fn a_compound_denial_by_the_second_limit_charges_neither<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let (k1, k2) = (subject_key(1), subject_key(2));
    let asks = [ask(5, 1_000, 0), ask(1, 60_000, 0)];
    assert!(
        s.acquire_all(&[k1, k2], &asks, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    let a = s
        .acquire_all(&[k1, k2], &asks, 60_000, &mut none())
        .unwrap();
    assert_eq!((a.verdict.allowed, a.verdict.reason), (false, Reason::Rate));
    assert_eq!(
        peek_remaining(&mut s, &k1, 5, 1_000),
        4,
        "the first limit was not charged"
    );
    assert_eq!(peek_remaining(&mut s, &k2, 1, 60_000), 0);
}

pub fn a_compound_admission_charges_every_limit<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let (k1, k2) = (subject_key(1), subject_key(2));
    let mut asks = [ask(5, 1_000, 0), ask(10, 60_000, 0)];
    asks[1].cost = 3;
    asks[0].cost = 3;
    assert!(
        s.acquire_all(&[k1, k2], &asks, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    assert_eq!(peek_remaining(&mut s, &k1, 5, 1_000), 2);
    assert_eq!(peek_remaining(&mut s, &k2, 10, 60_000), 7);
}

pub fn a_compound_call_reports_the_tightest_limit<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2), subject_key(3)];
    let asks = [ask(10, 1_000, 0), ask(2, 1_000, 0), ask(2, 60_000, 0)];
    let a = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    assert_eq!(
        (a.reported, a.verdict.remaining),
        (1, 1),
        "the fewest left, the first on ties"
    );
    assert_eq!(
        a.each.iter().map(|v| v.remaining).collect::<Vec<_>>(),
        [9, 1, 1]
    );
    s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    let a = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    assert!(!a.verdict.allowed);
    assert_eq!(
        (a.reported, a.verdict.retry_after_ms),
        (2, 30_000),
        "the longest wait"
    );
    assert_eq!(a.each[0].remaining, 8, "an admitting limit as it stands");
}

pub fn a_compound_call_of_one_limit_equals_acquire<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = ask(3, 1_000, 0);
    for t in [0, 0, 0, 0, 10, 400, 2_000] {
        clock.set(T0 + t);
        let single = s
            .acquire(&subject_key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict;
        let all = s
            .acquire_all(&[subject_key(2)], &[a], 60_000, &mut none())
            .unwrap();
        if single.source == Source::DenyCache {
            let (v, w) = (all.verdict, single);
            assert_eq!(
                (v.allowed, v.reason, v.retry_after_ms),
                (w.allowed, w.reason, w.retry_after_ms),
                "at +{t} ms, the single call answered by a deny cache"
            );
            continue;
        }
        assert_eq!(all.verdict, single, "at +{t} ms");
        assert_eq!((all.each.as_slice(), all.reported), (&[single][..], 0));
    }
}

pub fn a_compound_decision_is_counted_once<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2)];
    let asks = [ask(5, 1_000, 0), ask(1, 60_000, 0)];
    s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.allowed, c.denied_rate), (1, 1));
}

pub fn a_compound_slot_is_taken_in_the_first_bucket<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2)];
    let asks = [ask(5, 1_000, 1), ask(5, 60_000, 0)];
    let first = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    let token = first.lease.expect("a slot was asked for");
    assert_eq!(token.key.bucket, keys[0].bucket);
    let a = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    assert_eq!(
        (a.verdict.reason, a.reported, a.lease),
        (Reason::Inflight, 0, None)
    );
    assert_eq!(
        peek_remaining(&mut s, &keys[1], 5, 60_000),
        4,
        "the denial charged nothing"
    );
    assert_eq!(s.release(&[token], &mut none()).unwrap(), 1);
    assert!(s
        .acquire_all(&keys, &asks, 60_000, &mut none())
        .unwrap()
        .verdict
        .took());
}

pub fn a_compound_replay_takes_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2)];
    let asks = with_request_all(
        &[ask(5, 1_000, 0), ask(3, 60_000, 0)],
        &["a", "b"],
        9,
        10_000,
    );
    let first = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    assert!(first.verdict.took());
    let again = s.acquire_all(&keys, &asks, 60_000, &mut none()).unwrap();
    assert!(again.verdict.replay && again.verdict.allowed && again.lease.is_none());
    assert_eq!(again.verdict.source, Source::Replay);
    assert_eq!(
        (again.reported, again.verdict.remaining),
        (1, 2),
        "the tightest, as it stands"
    );
    assert_eq!(
        again.each.iter().map(|v| v.remaining).collect::<Vec<_>>(),
        [4, 2]
    );
    assert_eq!(peek_remaining(&mut s, &keys[0], 5, 1_000), 4);
    assert_eq!(peek_remaining(&mut s, &keys[1], 3, 60_000), 2);
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.retries, c.allowed), (1, 1));
}

pub fn a_compound_retry_in_progress_holds_nothing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2)];
    let asks = with_request_all(
        &[ask(5, 1_000, 1), ask(5, 60_000, 0)],
        &["a", "b"],
        9,
        10_000,
    );
    let first = s.acquire_all(&keys, &asks, 20_000, &mut none()).unwrap();
    assert!(first.lease.is_some());
    clock.set(T0 + 5_000);
    let r = s.acquire_all(&keys, &asks, 20_000, &mut none()).unwrap();
    assert_eq!(
        (r.verdict.allowed, r.verdict.reason, r.reported, r.lease),
        (false, Reason::InProgress, 0, None)
    );
    assert_eq!(r.verdict.retry_after_ms, 15_000);
    assert_eq!(
        peek_remaining(&mut s, &keys[1], 5, 60_000),
        4,
        "nothing taken"
    );
    assert_eq!(s.release(&[first.lease.unwrap()], &mut none()).unwrap(), 1);
    let r = s.acquire_all(&keys, &asks, 20_000, &mut none()).unwrap();
    assert!(r.verdict.replay && r.lease.is_none());
    s.flush(&mut none()).unwrap();
    let c = s.stats(&mut none()).unwrap().counters;
    assert_eq!((c.denied_in_progress, c.retries, c.allowed), (1, 1, 1));
}

/// The id of a compound call names its first limit's scope; a retry with other limits (or the
/// same limits in other scopes) is another request: charged.
pub fn a_compound_retry_with_other_scopes_is_charged<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let keys = [subject_key(1), subject_key(2), subject_key(3)];
    let (a, b2) = (ask(10, 60_000, 0), ask(10, 60_000, 0));
    let first = with_request_all(&[a, b2], &["a", "b"], 9, 10_000);
    assert!(s
        .acquire_all(&keys[..2], &first, 60_000, &mut none())
        .unwrap()
        .verdict
        .took());
    let other = with_request_all(&[a, b2], &["a", "c"], 9, 10_000);
    let v = s
        .acquire_all(&[keys[0], keys[2]], &other, 60_000, &mut none())
        .unwrap()
        .verdict;
    assert!(v.took() && !v.replay);
    assert_eq!(peek_remaining(&mut s, &keys[0], 10, 60_000), 8);
}

/// Reservations mixed with plain calls and peeks, forced charges among them, on each policy:
/// the store books exactly what the core books (its wait and the tokens owed included).
pub fn reservations_decide_as_the_core<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{Bucket, Kind};
    use ratelimit::core::decision::{decide, peek};
    use ratelimit::core::lease::Slots;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut rng = Lcg(24);
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let k = key(60 + n as u8);
        let limit = 1 + rng.below(5);
        let per = 1 + rng.below(900);
        let amount = if kind == Kind::SteppedBucket {
            1 + rng.below(limit + 1)
        } else {
            limit
        };
        let p = Policy::new(limit, per)
            .unwrap()
            .with_kind(kind)
            .with_amount(amount)
            .unwrap();
        let mut now = T0;
        let mut state: Option<Bucket> = None;
        for step in 0..150 {
            now += rng.below(500) as i64 - 100;
            clock.set(now);
            if rng.below(8) == 0 {
                let got = s.peek(&k, &p, &mut none()).unwrap();
                let want = peek(state, &p, now);
                assert_eq!(
                    (numbers(&got), got.reserved),
                    (numbers(&want), want.reserved),
                    "{kind:?} peek {step}"
                );
                continue;
            }
            let plain = Ask::new(p, 1 + rng.below(limit), 0);
            let a = match rng.below(4) {
                0 => plain,
                1 => plain.reserving(u64::MAX),
                _ => plain.reserving(rng.below(3 * per)),
            };
            let want = decide(state, &a, Slots::default(), now);
            let got = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
            if got.source == Source::DenyCache {
                assert_eq!(a.max_wait_ms, None, "a reservation is never the cache's");
                deny_cache_answer_is_within_the_core(&got, &want.verdict, &format!("{step}"));
                continue;
            }
            assert_eq!(
                (numbers(&got), got.wait_ms, got.reserved),
                (
                    numbers(&want.verdict),
                    want.verdict.wait_ms,
                    want.verdict.reserved
                ),
                "{kind:?} step {step} {a:?}"
            );
            state = Some(want.bucket);
        }
    }
}

/// Many connections reserving at one instant: each booking gets its own instant, one token's
/// earning time after the previous one (5 per second: 200 ms apart), none past the maximum
/// wait, and the rest are denied.
pub fn concurrent_reservations_book_distinct_instants<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    b.open(clock.clock());
    let a = ask(5, 1_000, 0).reserving(6_000);
    let mut waits: Vec<Option<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let clock = clock.clone();
                s.spawn(move || {
                    let mut store = b.open(clock.clock());
                    (0..5)
                        .map(|_| {
                            let v = store.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
                            v.verdict.allowed.then_some(v.verdict.wait_ms)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    waits.sort();
    let mut want = vec![None; 5];
    want.extend([Some(0); 5]);
    want.extend((1..=30).map(|i| Some(i * 200)));
    assert_eq!(waits, want);
}

/// A clock read after a booking's decision and before its instant is waiting, not running
/// backwards; one read before the booking's decision is.
pub fn a_read_between_a_booking_and_its_instant_is_no_clock_regression<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = ask(1, 1_000, 0);
    assert!(allowed(&mut s, &key(1), &a));
    clock.set(T0 + 100);
    let booked = s
        .acquire(&key(1), &a.reserving(u64::MAX), 60_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!(
        (booked.allowed, booked.wait_ms, booked.reserved),
        (true, 900, 1)
    );
    clock.set(T0 + 500);
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert_eq!((v.reason, v.retry_after_ms), (Reason::Rate, 1_500));
    assert_eq!(s.stats(&mut none()).unwrap().counters.clock_regressions, 0);
    clock.set(T0 + 50);
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert_eq!(v.reason, Reason::Rate);
    assert_eq!(s.stats(&mut none()).unwrap().counters.clock_regressions, 1);
}

fn refund<S: Store>(s: &mut S, k: &BucketKey, p: &Policy, cost: u64) -> bool {
    s.refund(k, p, cost, &mut none()).unwrap()
}

/// A token bucket emptied and given tokens back: they come back, never past its limit, and
/// a full bucket gets nothing.
pub fn a_refund_gives_tokens_back_up_to_the_capacity<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let p = Policy::new(3, 3_600_000).unwrap();
    assert!(allowed(&mut s, &key(1), &Ask::new(p, 3, 0)));
    assert!(refund(&mut s, &key(1), &p, 2));
    assert_eq!(peek_remaining(&mut s, &key(1), 3, 3_600_000), 2);
    assert!(refund(&mut s, &key(1), &p, 5), "one of the five fits");
    assert_eq!(peek_remaining(&mut s, &key(1), 3, 3_600_000), 3);
    assert!(!refund(&mut s, &key(1), &p, 1), "a full bucket");
    assert_eq!(peek_remaining(&mut s, &key(1), 3, 3_600_000), 3);
}

/// A subject that has no bucket gets none from a refund (it is full already).
pub fn a_refund_of_a_missing_bucket_leaves_it_missing<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let p = Policy::new(3, 60_000).unwrap();
    assert!(!refund(&mut s, &key(1), &p, 1));
    assert_eq!(s.stats(&mut none()).unwrap().entries, 0);
}

/// A window's count goes down, never below 0; once its window has ended, a refund gives
/// nothing and the next window starts afresh.
pub fn a_refund_lowers_a_window_and_leaves_an_ended_one_alone<B: Backend>(b: &B) {
    use ratelimit::core::bucket::Kind;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    for (n, kind) in [Kind::FixedWindow, Kind::SlidingWindow]
        .into_iter()
        .enumerate()
    {
        let k = key(10 + n as u8);
        let p = Policy::new(3, 10_000).unwrap().with_kind(kind);
        clock.set(T0);
        assert!(allowed(&mut s, &k, &Ask::new(p, 3, 0)));
        clock.set(T0 + 1_000);
        assert!(refund(&mut s, &k, &p, 1));
        let v = s.peek(&k, &p, &mut none()).unwrap();
        // The same window: a fixed one still ends 10 s after its start.
        let ends = if kind == Kind::FixedWindow {
            9_000
        } else {
            v.reset_after_ms
        };
        assert_eq!((v.remaining, v.reset_after_ms), (1, ends), "{kind:?}");
        assert!(refund(&mut s, &k, &p, 5), "{kind:?}");
        assert!(
            !refund(&mut s, &k, &p, 1),
            "{kind:?}: nothing left to give back"
        );
        assert!(allowed(&mut s, &k, &Ask::new(p, 3, 0)));
        clock.set(T0 + 25_000);
        assert!(!refund(&mut s, &k, &p, 1), "{kind:?}: its window has ended");
    }
}

/// A denial repeated (on a stack, by the worker's deny cache) ends when tokens come back.
pub fn a_refund_ends_a_repeated_denial<B: Backend>(b: &B) {
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let a = ask(1, 3_600_000, 0);
    assert!(allowed(&mut s, &key(1), &a));
    assert!(!allowed(&mut s, &key(1), &a));
    assert!(!allowed(&mut s, &key(1), &a));
    assert!(refund(&mut s, &key(1), &a.policy, 1));
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert_eq!((v.allowed, v.source), (true, Source::Store));
}

/// Forced charges past what a bucket can count (a debt booked to its latest instant, a
/// window's count at its bound) are taken uncounted: refunds of such a bucket give nothing,
/// and the next call is denied, on every policy (`core::bucket::refund`).
pub fn a_bucket_saturated_by_forced_charges_gets_nothing_back<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{Kind, MAX_LIMIT};
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let k = key(20 + n as u8);
        let p = Policy::new(1, 3_600_000).unwrap().with_kind(kind);
        let forced = Ask::new(p, MAX_LIMIT, 0).reserving(u64::MAX);
        for _ in 0..3 {
            s.acquire(&k, &forced, 60_000, &mut none()).unwrap();
        }
        for _ in 0..2 {
            let given = refund(&mut s, &k, &p, MAX_LIMIT);
            assert!(!given || kind == Kind::SteppedBucket, "{kind:?}");
        }
        assert!(!allowed(&mut s, &k, &Ask::new(p, 1, 0)), "{kind:?}");
    }
}

/// Random refunds among random decisions and reservations (time steps forward and back), on
/// each policy: what the store gives back and every answer after it are the core's
/// (`core::bucket::refund`), number for number.
pub fn refunds_are_the_cores<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{self, Bucket, Kind, MILLI};
    use ratelimit::core::decision::{decide, peek};
    use ratelimit::core::lease::Slots;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut rng = Lcg(25);
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let k = key(70 + n as u8);
        let limit = 1 + rng.below(5);
        let per = 1 + rng.below(900);
        let p = Policy::new(limit, per).unwrap().with_kind(kind);
        let mut now = T0;
        let mut state: Option<Bucket> = None;
        for step in 0..200 {
            now += rng.below(500) as i64 - 100;
            clock.set(now);
            match rng.below(8) {
                0 => {
                    let got = s.peek(&k, &p, &mut none()).unwrap();
                    assert_eq!(
                        numbers(&got),
                        numbers(&peek(state, &p, now)),
                        "{kind:?} peek {step}"
                    );
                    continue;
                }
                1 | 2 => {
                    let cost = 1 + rng.below(2 * limit);
                    let want = bucket::refund(state, &p, cost * MILLI, now);
                    let given = want.is_some_and(|r| r.given > 0);
                    assert_eq!(
                        refund(&mut s, &k, &p, cost),
                        given,
                        "{kind:?} refund {step}"
                    );
                    if given {
                        state = want.map(|r| r.bucket);
                    }
                    continue;
                }
                _ => {}
            }
            let plain = Ask::new(p, 1 + rng.below(limit), 0);
            let a = match rng.below(3) {
                0 => plain.reserving(rng.below(3 * per)),
                _ => plain,
            };
            let want = decide(state, &a, Slots::default(), now);
            let got = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
            if got.source == Source::DenyCache {
                deny_cache_answer_is_within_the_core(&got, &want.verdict, &format!("{step}"));
                continue;
            }
            assert_eq!(
                (numbers(&got), got.wait_ms, got.reserved),
                (
                    numbers(&want.verdict),
                    want.verdict.wait_ms,
                    want.verdict.reserved
                ),
                "{kind:?} step {step} {a:?}"
            );
            state = Some(want.bucket);
        }
    }
}

/// One key called with two periods (Laravel's decays, Symfony's intervals changed under a
/// running window): a fixed window keeps the period it was started with, in every store as in
/// the core, through decisions, reservations, refunds and peeks, number for number. (Fixed
/// windows only: the other policies refill by the call's period, so a denial the store does not
/// write and the core's refilled state part ways once the period changes.)
pub fn a_key_called_with_other_periods_is_the_cores<B: Backend>(b: &B) {
    use ratelimit::core::bucket::{self, Bucket, Kind, MILLI};
    use ratelimit::core::decision::{decide, peek};
    use ratelimit::core::lease::Slots;
    let clock = ManualClock::at(T0);
    let mut s = b.open(clock.clock());
    let mut rng = Lcg(31);
    for (n, kind) in [Kind::FixedWindow; 3].into_iter().enumerate() {
        let k = key(100 + n as u8);
        let limit = 1 + rng.below(5);
        let pers = [1 + rng.below(300), 300 + rng.below(3_000)];
        let mut now = T0;
        let mut state: Option<Bucket> = None;
        for step in 0..300 {
            now += rng.below(400) as i64 - 50;
            clock.set(now);
            let per = pers[rng.below(2) as usize];
            let p = Policy::new(limit, per).unwrap().with_kind(kind);
            match rng.below(8) {
                0 => {
                    let got = s.peek(&k, &p, &mut none()).unwrap();
                    assert_eq!(
                        numbers(&got),
                        numbers(&peek(state, &p, now)),
                        "{kind:?} peek {step} per {per}"
                    );
                    continue;
                }
                1 => {
                    let cost = 1 + rng.below(limit);
                    let want = bucket::refund(state, &p, cost * MILLI, now);
                    let given = want.is_some_and(|r| r.given > 0);
                    assert_eq!(
                        refund(&mut s, &k, &p, cost),
                        given,
                        "{kind:?} refund {step} per {per}"
                    );
                    if given {
                        state = want.map(|r| r.bucket);
                    }
                    continue;
                }
                _ => {}
            }
            let plain = Ask::new(p, 1 + rng.below(limit), 0);
            let a = match rng.below(3) {
                0 => plain.reserving(rng.below(3 * per)),
                _ => plain,
            };
            let want = decide(state, &a, Slots::default(), now);
            let got = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
            if got.source == Source::DenyCache {
                deny_cache_answer_is_within_the_core(&got, &want.verdict, &format!("{step}"));
                continue;
            }
            assert_eq!(
                (numbers(&got), got.wait_ms, got.reserved),
                (
                    numbers(&want.verdict),
                    want.verdict.wait_ms,
                    want.verdict.reserved
                ),
                "{kind:?} step {step} per {per} {a:?}"
            );
            state = Some(want.bucket);
        }
    }
}

/// Threads with their own connections, each admitting and giving back what it was admitted,
/// over and over, on one bucket of 5 (a day to refill): each step is atomic, so at every
/// instant at most 5 are held, and once all is given back the bucket is exactly full.
pub fn refunds_racing_admissions_lose_and_mint_nothing<B: Backend>(b: &B) {
    use ratelimit::core::bucket::Kind;
    let clock = ManualClock::at(T0);
    b.open(clock.clock());
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let k = key(90 + n as u8);
        let a = Ask::new(Policy::new(5, 86_400_000).unwrap().with_kind(kind), 1, 0);
        let admitted: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    let clock = clock.clone();
                    s.spawn(move || {
                        let mut store = b.open(clock.clock());
                        let mut admitted = 0;
                        for _ in 0..40 {
                            if allowed(&mut store, &k, &a) {
                                admitted += 1;
                                assert!(refund(&mut store, &k, &a.policy, 1), "{kind:?}");
                            }
                        }
                        admitted
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(admitted >= 5, "{kind:?}: {admitted}");
        let mut s = b.open(clock.clock());
        assert_eq!(peek_remaining(&mut s, &k, 5, 86_400_000), 5, "{kind:?}");
        // Full again: five more, and no sixth.
        let more = (0..6).filter(|_| allowed(&mut s, &k, &a)).count();
        assert_eq!(more, 5, "{kind:?}");
    }
}
