//! Request ids (`$request_id`): what a store remembers of an admission made with one, and the
//! rule that judges a later call with the same id. Pure: no I/O, time passed in. Every store
//! (SQLite, the Redis scripts, the test fake) applies [`judge`] inside its one atomic step.
//!
//! A request id is chosen by the client, so it can never buy what the limit forbids:
//! - a retry is answered again ([`Judgement::Replay`]) only when it asks for exactly what was
//!   admitted ([`Terms`]), at most `ratelimit.request_replays` times, takes nothing and is
//!   flagged as a replay, with no lease (the application must not run the work again);
//! - while the first admission's lease lives, a retry is denied ([`Judgement::InProgress`]):
//!   never two in flight for one id;
//! - anything else (no record, an expired one, other terms, no replays left) is decided as
//!   a plain call, charged ([`Judgement::Fresh`]), and remembered anew if admitted.

use super::bucket::Policy;
use super::subject::Pseudonym;
use sha2::{Digest, Sha256};

/// `ratelimit.request_replays`' default: a client's usual retry budget (Stripe's SDKs retry a
/// request 2 to 3 times).
pub const DEFAULT_REPLAYS: u32 = 3;
/// The most `ratelimit.request_replays` accepts.
pub const MAX_REPLAYS: u32 = 1_000;

/// A digest of what a call asked for: its kind, and for each limit its scope, limit, period and
/// cost, and the most in-flight leases. A retry is the same request only with the same terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Terms(pub [u8; 16]);

/// Which function made the call: a plain `ratelimit_acquire()` with id K is not a retry of a
/// `ratelimit_acquire_all()` with id K, even with one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Acquire,
    AcquireAll,
}

/// One limit of a call, as its terms see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit<'a> {
    pub scope: &'a str,
    pub policy: Policy,
    pub cost: u64,
}

impl Terms {
    /// SHA-256 of a canonical encoding, truncated to 16 bytes: a version tag, the kind (one
    /// byte), the number of limits (one byte), then per limit the scope's length (one byte: a
    /// scope is at most 64 bytes) and bytes, the limit, the period in ms and the cost (8 bytes
    /// each, big-endian), then the most in-flight leases (8 bytes). Every field has a fixed
    /// length or a length before it, so two different calls never share an encoding.
    ///
    /// A call with a window policy among its limits is encoded as version 2: the same, with
    /// each limit's policy code (one byte) after its cost, and for a stepped bucket its amount
    /// (8 bytes) after the code. Token buckets alone keep version
    /// 1, so records written before policies existed still match.
    pub fn of(kind: Kind, limits: &[Limit<'_>], max_inflight: u64) -> Self {
        let v2 = limits
            .iter()
            .any(|l| l.policy.kind() != super::bucket::Kind::TokenBucket);
        let mut h = Sha256::new();
        h.update(if v2 {
            b"ratelimit terms 2\0"
        } else {
            b"ratelimit terms 1\0"
        });
        h.update([
            match kind {
                Kind::Acquire => 0u8,
                Kind::AcquireAll => 1,
            },
            limits.len().min(255) as u8,
        ]);
        for l in limits {
            let scope = l.scope.as_bytes();
            h.update([scope.len().min(255) as u8]);
            h.update(scope);
            h.update(l.policy.limit().to_be_bytes());
            h.update(l.policy.per_ms().to_be_bytes());
            h.update(l.cost.to_be_bytes());
            if v2 {
                h.update([l.policy.kind().code()]);
                if l.policy.kind() == super::bucket::Kind::SteppedBucket {
                    h.update(l.policy.amount().to_be_bytes());
                }
            }
        }
        h.update(max_inflight.to_be_bytes());
        let digest = h.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        Terms(out)
    }
}

/// What a store remembers of an admission made with a request id, as the judge reads it. (The
/// store also keeps the lease the admission took, to tell whether it is live.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The bucket the admission was charged to.
    pub bucket: Pseudonym,
    pub terms: Terms,
    /// Replays still allowed.
    pub replays_left: u32,
    /// Ms from which the record is forgotten.
    pub expires: i64,
}

/// How a call with a request id is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// Decided as a plain call (charged); remembered anew if admitted, replacing any record.
    Fresh,
    /// The first admission's lease is live until `until` (ms): denied, nothing taken.
    InProgress { until: i64 },
    /// Answered as a replay of the first admission: allowed, nothing taken, no lease. The
    /// store takes one from the record's replays left.
    Replay,
}

/// The rule. `record`: the one stored under the call's request name, if any; `bucket` and
/// `terms`: the call's; `live_lease_until`: the expiry of the record's lease when that lease is
/// live at `now` (None: the admission took none, or it was released or expired).
pub fn judge(
    record: Option<&Record>,
    bucket: &Pseudonym,
    terms: &Terms,
    now: i64,
    live_lease_until: Option<i64>,
) -> Judgement {
    let Some(r) = record else {
        return Judgement::Fresh;
    };
    if r.expires <= now || r.bucket != *bucket || r.terms != *terms {
        return Judgement::Fresh;
    }
    match live_lease_until {
        Some(until) if until > now => Judgement::InProgress { until },
        _ if r.replays_left > 0 => Judgement::Replay,
        _ => Judgement::Fresh,
    }
}

/// Until when an admission made at `now` is remembered: `request_ttl_ms`, or as long as its
/// lease if it took one and that is longer (a retry while the lease lives is in progress).
pub fn expiry(now: i64, request_ttl_ms: u64, lease_ttl_ms: Option<u64>) -> i64 {
    super::lease::expiry(now, request_ttl_ms.max(lease_ttl_ms.unwrap_or(0)))
}

/// Whether an admission is worth remembering: with no replay allowed and no lease, its record
/// would only ever be judged [`Judgement::Fresh`].
pub fn worth_remembering(replays: u32, took_lease: bool) -> bool {
    replays > 0 || took_lease
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limit(scope: &str, limit: u64, per_ms: u64, cost: u64) -> Limit<'_> {
        Limit {
            scope,
            policy: Policy::new(limit, per_ms).unwrap(),
            cost,
        }
    }

    fn terms() -> Terms {
        Terms::of(Kind::Acquire, &[limit("api", 5, 60_000, 1)], 1)
    }

    fn record(replays_left: u32) -> Record {
        Record {
            bucket: [1; 16],
            terms: terms(),
            replays_left,
            expires: 10_000,
        }
    }

    #[test]
    fn every_term_changes_the_digest() {
        let base = terms();
        let others = [
            Terms::of(Kind::AcquireAll, &[limit("api", 5, 60_000, 1)], 1),
            Terms::of(Kind::Acquire, &[limit("web", 5, 60_000, 1)], 1),
            Terms::of(Kind::Acquire, &[limit("api", 6, 60_000, 1)], 1),
            Terms::of(Kind::Acquire, &[limit("api", 5, 60_001, 1)], 1),
            Terms::of(Kind::Acquire, &[limit("api", 5, 60_000, 2)], 1),
            Terms::of(Kind::Acquire, &[limit("api", 5, 60_000, 1)], 0),
            Terms::of(
                Kind::Acquire,
                &[Limit {
                    policy: limit("api", 5, 60_000, 1)
                        .policy
                        .with_kind(crate::core::bucket::Kind::FixedWindow),
                    ..limit("api", 5, 60_000, 1)
                }],
                1,
            ),
            Terms::of(
                Kind::Acquire,
                &[limit("api", 5, 60_000, 1), limit("day", 5, 60_000, 1)],
                1,
            ),
        ];
        for (i, o) in others.iter().enumerate() {
            assert_ne!(*o, base, "change {i} kept the digest");
        }
        assert_eq!(terms(), base, "a digest is a function of the terms");
    }

    #[test]
    fn the_encoding_is_pinned() {
        // SHA-256("ratelimit terms 1\0" 00 01 03 "api" limit 5, per 60000, cost 1, inflight 1),
        // first 16 bytes: stores of different versions must agree on it.
        let mut m = b"ratelimit terms 1\0".to_vec();
        m.extend([0, 1, 3]);
        m.extend(b"api");
        for v in [5u64, 60_000, 1, 1] {
            m.extend(v.to_be_bytes());
        }
        assert_eq!(terms().0, Sha256::digest(&m)[..16]);
    }

    #[test]
    fn scopes_cannot_run_into_each_other() {
        let a = Terms::of(
            Kind::AcquireAll,
            &[limit("ab", 5, 1_000, 1), limit("c", 5, 1_000, 1)],
            0,
        );
        let b = Terms::of(
            Kind::AcquireAll,
            &[limit("a", 5, 1_000, 1), limit("bc", 5, 1_000, 1)],
            0,
        );
        assert_ne!(a, b);
    }

    #[test]
    fn the_judge_answers_each_case() {
        let (b, t) = ([1; 16], terms());
        assert_eq!(judge(None, &b, &t, 0, None), Judgement::Fresh);
        assert_eq!(judge(Some(&record(3)), &b, &t, 0, None), Judgement::Replay);
        assert_eq!(
            judge(Some(&record(3)), &b, &t, 0, Some(5_000)),
            Judgement::InProgress { until: 5_000 }
        );
        // With no replay left, a live lease is still in progress (never two in flight).
        assert_eq!(
            judge(Some(&record(0)), &b, &t, 0, Some(5_000)),
            Judgement::InProgress { until: 5_000 }
        );
        assert_eq!(judge(Some(&record(0)), &b, &t, 0, None), Judgement::Fresh);
        assert_eq!(
            judge(Some(&record(3)), &b, &t, 10_000, None),
            Judgement::Fresh,
            "expired"
        );
        assert_eq!(
            judge(Some(&record(3)), &b, &t, 9_999, Some(9_999)),
            Judgement::Replay,
            "a lease at its expiry is not live"
        );
        let other = Terms::of(Kind::Acquire, &[limit("api", 5, 60_000, 100)], 1);
        assert_eq!(
            judge(Some(&record(3)), &b, &other, 0, Some(5_000)),
            Judgement::Fresh,
            "other terms: charged, even while the first runs"
        );
        assert_eq!(
            judge(Some(&record(3)), &[2; 16], &t, 0, None),
            Judgement::Fresh,
            "another bucket"
        );
    }

    #[test]
    fn a_record_lives_for_the_longer_of_request_ttl_and_its_lease() {
        assert_eq!(expiry(1_000, 60_000, None), 61_000);
        assert_eq!(expiry(1_000, 60_000, Some(120_000)), 121_000);
        assert_eq!(expiry(1_000, 60_000, Some(10_000)), 61_000);
        assert!(!worth_remembering(0, false));
        assert!(worth_remembering(0, true) && worth_remembering(1, false));
    }

    proptest! {
        /// The judge as a table: Fresh unless the record is alive, of this bucket and these
        /// terms; then InProgress exactly while its lease lives, else Replay exactly while
        /// replays are left.
        #[test]
        fn the_judge_follows_its_rule(
            has_record in any::<bool>(),
            same_bucket in any::<bool>(),
            same_terms in any::<bool>(),
            replays_left in 0u32..5,
            expires in 0i64..100,
            now in 0i64..100,
            lease in proptest::option::of(0i64..100),
        ) {
            let t = terms();
            let r = Record { bucket: [1; 16], terms: t, replays_left, expires };
            let bucket = if same_bucket { [1; 16] } else { [2; 16] };
            let asked = if same_terms { t } else { Terms([9; 16]) };
            let j = judge(has_record.then_some(&r), &bucket, &asked, now, lease);
            let matches = has_record && same_bucket && same_terms && expires > now;
            let expected = match lease {
                Some(u) if matches && u > now => Judgement::InProgress { until: u },
                _ if matches && replays_left > 0 => Judgement::Replay,
                _ => Judgement::Fresh,
            };
            prop_assert_eq!(j, expected);
        }

        /// A sequence of calls with one id against one record: replays never exceed the
        /// budget, and none is given while a lease lives.
        #[test]
        fn replays_are_bounded_by_the_budget(
            replays in 0u32..6,
            steps in proptest::collection::vec((0i64..50, any::<bool>()), 1..40),
        ) {
            let t = terms();
            let mut r = Record { bucket: [1; 16], terms: t, replays_left: replays, expires: 1_000 };
            let mut given = 0;
            let mut now = 0;
            for (dt, lease_live) in steps {
                now += dt;
                let lease = lease_live.then_some(now + 1);
                match judge(Some(&r), &[1; 16], &t, now, lease) {
                    Judgement::Replay => {
                        prop_assert!(!lease_live);
                        r.replays_left -= 1;
                        given += 1;
                    }
                    Judgement::InProgress { until } => prop_assert!(lease_live && until > now),
                    Judgement::Fresh => prop_assert!(r.replays_left == 0 || now >= r.expires),
                }
            }
            prop_assert!(given <= replays);
        }

        /// A limit's policy, and a stepped bucket's amount, are terms too: a retry under
        /// another policy or amount is charged (the stub's and usage.md's list of terms).
        #[test]
        fn digests_tell_policies_and_amounts_apart(
            l in 1u64..1_000, per in 1u64..100_000, amount in 1u64..2_000,
        ) {
            use super::super::bucket::Kind as Policies;
            let of = |p: Policy| Terms::of(Kind::Acquire, &[Limit { scope: "s", policy: p, cost: 1 }], 0);
            let base = Policy::new(l, per).unwrap();
            let stepped = |a: u64| base.with_kind(Policies::SteppedBucket).with_amount(a).unwrap();
            let all = [
                of(base),
                of(base.with_kind(Policies::FixedWindow)),
                of(base.with_kind(Policies::SlidingWindow)),
                of(stepped(amount)),
                of(stepped(amount + 1)),
            ];
            for i in 0..all.len() {
                for j in i + 1..all.len() {
                    prop_assert_ne!(all[i], all[j], "{} / {}", i, j);
                }
            }
            // The default amount is the limit's: the same terms as giving it.
            prop_assert_eq!(of(base.with_kind(Policies::SteppedBucket)), of(stepped(l)));
        }

        /// Equal terms give equal digests; any one field changed gives another.
        #[test]
        fn digests_tell_terms_apart(
            scope in "[a-z]{1,8}",
            l in 1u64..1_000, per in 1u64..100_000, cost in 1u64..10, inflight in 0u64..4,
            which in 0usize..5,
        ) {
            let base = Terms::of(Kind::Acquire, &[limit(&scope, l, per, cost)], inflight);
            prop_assert_eq!(base, Terms::of(Kind::Acquire, &[limit(&scope, l, per, cost)], inflight));
            let other_scope = format!("{scope}x");
            let changed = match which {
                0 => Terms::of(Kind::Acquire, &[limit(&other_scope, l, per, cost)], inflight),
                1 => Terms::of(Kind::Acquire, &[limit(&scope, l + 1, per, cost)], inflight),
                2 => Terms::of(Kind::Acquire, &[limit(&scope, l, per + 1, cost)], inflight),
                3 => Terms::of(Kind::Acquire, &[limit(&scope, l, per, cost + 1)], inflight),
                _ => Terms::of(Kind::Acquire, &[limit(&scope, l, per, cost)], inflight + 1),
            };
            prop_assert_ne!(base, changed);
        }
    }
}
