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
    /// A retry of an admission made with the same request id and terms, whose lease is still
    /// live: the first is still running (see `core::request`).
    InProgress,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::Rate => "rate",
            Reason::Inflight => "inflight",
            Reason::Unavailable => "unavailable",
            Reason::InProgress => "in_progress",
        }
    }
}

/// Who made a decision: the store itself, or one of the wrappers that stand in for it (see
/// `crate::storage`'s `DenyCache` and `Fallback`), or the limiter's fail-open policy. An
/// operator reading a decision (or a log of them) can tell a real one from a stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The configured store decided, in its atomic step.
    Store,
    /// A local copy of a recent `rate` denial answered, without asking the store.
    DenyCache,
    /// The primary store was unavailable: this host's local store decided.
    Fallback,
    /// No store could decide ("unavailable"): `ratelimit.fail_open` did, admitting the call
    /// when it is on, denying it when it is off.
    FailOpen,
    /// The answer repeats an earlier admission of the same request id and terms (a replay,
    /// see `core::request`): the store answered it in its atomic step, taking nothing.
    Replay,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Store => "store",
            Source::DenyCache => "deny_cache",
            Source::Fallback => "fallback",
            Source::FailOpen => "fail_open",
            Source::Replay => "replay",
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
    /// A denial (`rate` or `inflight`) of a shadow scope (`ratelimit.dry_run`), answered
    /// `allowed` with its real reason kept; it took nothing, like every denial.
    pub dry_run: bool,
    /// A replay: the answer repeated for a retry of an earlier admission with the same request
    /// id and terms. Allowed, it took nothing and holds no lease; its numbers are the bucket's
    /// as it stands now.
    pub replay: bool,
    /// Who decided.
    pub source: Source,
    /// A reservation's booking: until the booked tokens are earned (0 when they were there).
    pub wait_ms: u64,
    /// Whole tokens taken ahead of what the policy had and not yet earned back now (see
    /// [`Bucket::reserved`]).
    pub reserved: u64,
}

/// What a retry of an "unavailable" decision should wait: an estimate, since nothing is known.
pub const UNAVAILABLE_RETRY_MS: u64 = 1_000;

impl Verdict {
    /// A decision that could not be made; allowed only when the operator chose to fail open
    /// (then its source is [`Source::FailOpen`]; a denial is still the store's answer).
    pub fn unavailable(fail_open: bool) -> Self {
        Self {
            allowed: fail_open,
            reason: Reason::Unavailable,
            remaining: 0,
            retry_after_ms: if fail_open { 0 } else { UNAVAILABLE_RETRY_MS },
            reset_after_ms: 0,
            next_token_ms: 0,
            dry_run: false,
            replay: false,
            // No store could decide: the operator's fail_open choice did (allowed when it
            // admits, denied when it does not), whatever the reason the store gave.
            source: Source::FailOpen,
            wait_ms: 0,
            reserved: 0,
        }
    }

    /// Whether this decision took what it asked for (tokens, and a slot if asked): a real
    /// admission, never a shadow one, a fail-open one nor a replay.
    pub fn took(&self) -> bool {
        self.reason == Reason::Ok && !self.replay
    }
}

/// A request for `cost` tokens and, when `max_inflight > 0`, one of `max_inflight` slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub policy: Policy,
    pub cost: u64,
    pub max_inflight: u64,
    /// The scope is a shadow one (`ratelimit.dry_run`): a denial is answered `allowed`.
    pub dry_run: bool,
    /// The request id this call carries (see [`Request`]), if any.
    pub request: Option<Request>,
    /// A reservation (`ratelimit_reserve`): tokens not available now are booked ahead when
    /// they are earned within this many ms (`u64::MAX`: whatever the wait, a forced charge).
    /// None: a plain call, denied when they are not available now.
    pub max_wait_ms: Option<u64>,
}

/// `ratelimit_reserve()`'s `$max_wait` seconds as whole milliseconds, rounded down so that no
/// booking waits longer than asked; INF is any wait (`u64::MAX`, a forced charge). None for a
/// negative wait or NAN (the caller's error).
pub fn max_wait_ms(seconds: f64) -> Option<u64> {
    match seconds {
        w if w == f64::INFINITY => Some(u64::MAX),
        w if w >= 0.0 => {
            // The largest whole ms whose seconds (as PHP reads `waitFor`) are at most `w`:
            // `w * 1000` may round across an integer either way (0.29 * 1000 is
            // 289.99999999999994), so the nearest one, less one when it is past `w`.
            let ms = ((w * 1000.0).round() as u64).min(u64::MAX - 1);
            Some(if ms as f64 / 1000.0 > w { ms - 1 } else { ms })
        }
        _ => None,
    }
}

impl Ask {
    /// A plain call: no shadow mode, no request id.
    pub fn new(policy: Policy, cost: u64, max_inflight: u64) -> Self {
        Self {
            policy,
            cost,
            max_inflight,
            dry_run: false,
            request: None,
            max_wait_ms: None,
        }
    }

    /// A reservation: books ahead a wait of at most `max_wait_ms` (see [`Self::max_wait_ms`]).
    pub fn reserving(self, max_wait_ms: u64) -> Self {
        Self {
            max_wait_ms: Some(max_wait_ms),
            ..self
        }
    }
}

/// A call made with a request id (`ratelimit_acquire(..., $request_id)`): its admission is
/// remembered under `name` (a pseudonym of scope, subject and id) with its `terms`, for
/// `ttl_ms` (or as long as its lease, if longer), and a later call with the same name is
/// judged by [`super::request::judge`]: in progress while the lease lives, then replayed at most
/// `replays` times, otherwise charged afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub name: super::subject::Pseudonym,
    pub ttl_ms: u64,
    /// What the call asked for: only a retry with the same terms is the same request.
    pub terms: super::request::Terms,
    /// Replays allowed after the admission (`ratelimit.request_replays`).
    pub replays: u32,
}

/// The result: the bucket to store and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub bucket: Bucket,
    pub verdict: Verdict,
    pub clock_regressed: bool,
}

/// Refill `stored` (a missing bucket starts full, a missing window fresh), then take `cost`
/// tokens if they are there and a slot is free. A denial takes nothing.
pub fn decide(stored: Option<Bucket>, ask: &Ask, slots: Slots, now: i64) -> Decided {
    let p = &ask.policy;
    let refilled = stored
        .unwrap_or_else(|| Bucket::full(p, now))
        .refill(p, now);
    let mut bucket = refilled.bucket;
    let cost = ask.cost * MILLI;
    // A reservation books what is not there yet when it is earned within its maximum wait.
    let booking = ask
        .max_wait_ms
        .map(|max| (bucket.book_wait(p, cost, now), max))
        .filter(|&(wait, max)| wait <= max)
        .map(|(wait, _)| wait);
    let reason = if booking.is_none() && bucket.available(p, now) < cost {
        Reason::Rate
    } else if ask.max_inflight > 0 && slots.live >= ask.max_inflight {
        Reason::Inflight
    } else {
        Reason::Ok
    };
    let retry_after_ms = match reason {
        Reason::Ok | Reason::Unavailable | Reason::InProgress => 0,
        Reason::Rate => bucket.wait_for(p, cost, now),
        Reason::Inflight => slots
            .earliest_expiry
            .map_or(0, |e| (e as i128 - now as i128).max(0) as u64),
    };
    let wait_ms = match (reason, booking) {
        (Reason::Ok, Some(wait)) => {
            bucket.book(p, cost, wait, now);
            wait
        }
        (Reason::Ok, None) => {
            bucket.take(p, cost, now);
            0
        }
        _ => 0,
    };
    // A shadow scope answers a would-be denial `allowed`: it took nothing (no token, no slot),
    // exactly as the real denial would have.
    let dry_run = ask.dry_run && reason != Reason::Ok;
    let mut verdict = Verdict {
        allowed: reason == Reason::Ok || dry_run,
        reason,
        remaining: 0,
        retry_after_ms,
        reset_after_ms: 0,
        next_token_ms: 0,
        dry_run,
        replay: false,
        source: Source::Store,
        wait_ms,
        reserved: 0,
    };
    standing(&mut verdict, &bucket, p, now);
    Decided {
        bucket,
        verdict,
        clock_regressed: refilled.clock_regressed,
    }
}

/// Whether a denial must still write the state it leaves (`decided`, from `stored`): a store
/// may answer a denial without writing (SQLite's read snapshot), which is exact as long as
/// the state is a function of the last written one and the time. A token bucket's refill is
/// (a stepped one's too: refilling twice steps as refilling once);
/// so is a window's roll while the clock runs forward, but a clock read earlier than a rolled
/// window's start counts the rolled state at that start, and a state converted from another
/// policy depends on when it was converted. Those are written, so that every store answers
/// the same (each answer mints nothing either way).
pub fn denial_writes(stored: &Bucket, decided: &Bucket, policy: &Policy) -> bool {
    stored.kind != policy.kind() || (!policy.kind().is_bucket() && stored != decided)
}

/// Sets the verdict's numbers that tell the bucket as it stands at `now`: `remaining`,
/// `reset_after_ms` (a fixed window: until its end), `next_token_ms`, `reserved`.
pub fn standing(v: &mut Verdict, b: &Bucket, p: &Policy, now: i64) {
    v.remaining = b.whole_tokens(p, now);
    v.reserved = b.reserved(p, now);
    v.reset_after_ms = b.wait_until_full(p, now);
    v.next_token_ms = b.wait_for_next_token(p, now);
}

/// What a call of cost 1 would get now, without taking anything.
pub fn peek(stored: Option<Bucket>, policy: &Policy, now: i64) -> Verdict {
    let ask = Ask::new(*policy, 1, 0);
    let mut v = decide(stored, &ask, Slots::default(), now).verdict;
    if v.allowed {
        // Report the tokens as they are, not as they would be after the take.
        let b = stored
            .unwrap_or_else(|| Bucket::full(policy, now))
            .refill(policy, now)
            .bucket;
        standing(&mut v, &b, policy, now);
    }
    v
}

/// A replay (see [`super::request::Judgement::Replay`]): allowed, nothing taken, no lease; its
/// numbers are the bucket's as it stands now, as a peek would say.
pub fn replay(stored: Option<Bucket>, policy: &Policy, now: i64) -> Verdict {
    as_replay(peek(stored, policy, now))
}

/// A peek's verdict (the bucket as it stands) answered as a replay.
pub fn as_replay(peeked: Verdict) -> Verdict {
    Verdict {
        allowed: true,
        reason: Reason::Ok,
        retry_after_ms: 0,
        dry_run: false,
        replay: true,
        source: Source::Replay,
        ..peeked
    }
}

/// A retry while the first admission's lease lives until `until` (see
/// [`super::request::Judgement::InProgress`]): denied until then, nothing taken; the bucket as
/// it stands now. In a shadow scope (`dry_run`) answered allowed, as its other denials are.
pub fn in_progress(
    stored: Option<Bucket>,
    policy: &Policy,
    until: i64,
    now: i64,
    dry_run: bool,
) -> Verdict {
    as_in_progress(peek(stored, policy, now), until, now, dry_run)
}

/// A peek's verdict (the bucket as it stands) answered as in progress until `until`.
pub fn as_in_progress(peeked: Verdict, until: i64, now: i64, dry_run: bool) -> Verdict {
    Verdict {
        allowed: dry_run,
        reason: Reason::InProgress,
        retry_after_ms: (i128::from(until) - i128::from(now)).max(0) as u64,
        dry_run,
        replay: false,
        source: Source::Store,
        ..peeked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(limit: u64, per_ms: u64, cost: u64, max_inflight: u64) -> Ask {
        Ask::new(Policy::new(limit, per_ms).unwrap(), cost, max_inflight)
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
        let stored = Bucket::tokens_at(500, 0);
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
            Some(Bucket::tokens_at(3_000, 0)),
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
            Some(Bucket::tokens_at(0, 0)),
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
        let v = peek(Some(Bucket::tokens_at(0, 0)), &p, 0);
        assert_eq!(v.reason, Reason::Rate);
        assert_eq!(v.retry_after_ms, 12_000);
    }

    #[test]
    fn unavailable_is_a_denial_unless_failing_open() {
        assert!(!Verdict::unavailable(false).allowed);
        assert!(Verdict::unavailable(true).allowed);
        assert_eq!(Verdict::unavailable(true).reason, Reason::Unavailable);
    }

    #[test]
    fn a_fail_open_admission_says_so_and_a_store_decision_too() {
        assert_eq!(Verdict::unavailable(true).source, Source::FailOpen);
        assert_eq!(Verdict::unavailable(false).source, Source::FailOpen);
        let d = decide(None, &ask(1, 1_000, 1, 0), Slots::default(), 0);
        assert_eq!(d.verdict.source, Source::Store);
    }

    #[test]
    fn sources_have_their_documented_names() {
        let names = [
            Source::Store,
            Source::DenyCache,
            Source::Fallback,
            Source::FailOpen,
            Source::Replay,
        ]
        .map(Source::as_str);
        assert_eq!(
            names,
            ["store", "deny_cache", "fallback", "fail_open", "replay"]
        );
    }

    #[test]
    fn a_shadow_denial_is_allowed_keeps_its_reason_and_takes_nothing() {
        let empty = Bucket::tokens_at(0, 0);
        let mut a = ask(1, 1_000, 1, 0);
        a.dry_run = true;
        let d = decide(Some(empty), &a, Slots::default(), 0);
        assert_eq!(
            (d.verdict.allowed, d.verdict.reason, d.verdict.dry_run),
            (true, Reason::Rate, true)
        );
        assert!(!d.verdict.took());
        assert_eq!(d.bucket.tokens, 0);
        assert_eq!(d.verdict.retry_after_ms, 1_000, "the real wait is kept");
        let slots = Slots {
            live: 1,
            earliest_expiry: Some(5_000),
        };
        let mut a = ask(5, 1_000, 1, 1);
        a.dry_run = true;
        let d = decide(None, &a, slots, 0);
        assert_eq!(
            (d.verdict.allowed, d.verdict.reason, d.verdict.dry_run),
            (true, Reason::Inflight, true)
        );
        assert_eq!(d.bucket.tokens, 5_000, "nothing taken");
        // A shadow admission is an admission like any other.
        let d = decide(None, &a, Slots::default(), 0);
        assert!(d.verdict.took() && !d.verdict.dry_run);
        assert_eq!(d.bucket.tokens, 4_000);
    }

    #[test]
    fn a_replay_takes_nothing_and_tells_the_bucket_as_it_stands() {
        let p = Policy::new(5, 60_000).unwrap();
        let half = Bucket::tokens_at(2_500, 0);
        let v = replay(Some(half), &p, 12_000);
        assert_eq!(
            (v.allowed, v.reason, v.replay, v.source),
            (true, Reason::Ok, true, Source::Replay)
        );
        assert!(!v.took(), "a replay is no admission");
        assert_eq!((v.remaining, v.retry_after_ms), (3, 0));
        assert_eq!(
            v.reset_after_ms,
            peek(Some(half), &p, 12_000).reset_after_ms
        );
        let empty = Bucket::tokens_at(0, 0);
        let v = replay(Some(empty), &p, 0);
        assert!(
            v.allowed && v.remaining == 0,
            "allowed even with the bucket empty"
        );
    }

    #[test]
    fn in_progress_is_a_denial_until_the_lease_ends() {
        let p = Policy::new(5, 60_000).unwrap();
        let v = in_progress(None, &p, 30_000, 10_000, false);
        assert_eq!(
            (v.allowed, v.reason.as_str(), v.retry_after_ms, v.remaining),
            (false, "in_progress", 20_000, 5)
        );
        assert!(!v.took() && !v.replay && !v.dry_run);
        let v = in_progress(None, &p, 30_000, 10_000, true);
        assert_eq!(
            (v.allowed, v.dry_run),
            (true, true),
            "a shadow scope admits"
        );
        assert!(!v.took());
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
            assert_eq!(f.len(), 14, "{line:?}");
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let now = 1_700_000_000_000 + f[6].parse::<i64>().unwrap();
            let a = Ask::new(Policy::from_vector(n(1), n(2), f[3]).unwrap(), n(7), n(4));
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
                leases.push(super::super::lease::expiry(now, n(5)));
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
            assert_eq!(got.as_slice(), &f[8..], "{line:?}");
            steps += 1;
        }
        assert!(steps >= 20, "only {steps} steps read");
    }

    /// `$max_wait` in whole ms is the longest wait whose seconds do not exceed it as PHP reads
    /// them: 0.11699999999999999 * 1000 rounds to 117.0 in floats, yet 117 ms is 0.117 s.
    #[test]
    fn the_longest_wait_in_ms_is_never_past_the_seconds_asked() {
        let asked = 0.116_999_999_999_999_99_f64;
        let ms = max_wait_ms(asked).unwrap();
        assert!(ms as f64 / 1000.0 <= asked, "{ms} ms past {asked} s");
        assert_eq!(max_wait_ms(0.117), Some(117));
        assert_eq!(
            max_wait_ms(0.29),
            Some(290),
            "0.29 * 1000 is 289.99999999999994"
        );
    }

    /// tests/vectors/reservations.tsv (also run through every store by the conformance
    /// suite), replayed on the pure core.
    #[test]
    fn the_reservation_vectors_hold() {
        use std::collections::HashMap;
        let mut state: HashMap<&str, Option<Bucket>> = HashMap::new();
        let mut steps = 0;
        for line in include_str!("../../tests/vectors/reservations.tsv").lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 13, "{line:?}");
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let now = 1_700_000_000_000 + f[4].parse::<i64>().unwrap();
            let plain = Ask::new(Policy::from_vector(n(1), n(2), f[3]).unwrap(), n(5), 0);
            let a = match f[6] {
                "-" => plain,
                "inf" => plain.reserving(u64::MAX),
                _ => plain.reserving(n(6)),
            };
            let stored = state.entry(f[0]).or_default();
            let d = decide(*stored, &a, Slots::default(), now);
            *stored = Some(d.bucket);
            let v = d.verdict;
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
        assert!(steps >= 20, "only {steps} steps read");
    }
}
