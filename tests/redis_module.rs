//! The Redis store on a server with the native commands (`redis-server --loadmodule
//! libratelimit_redis.so`, issue 24): the conformance suite and the shared vectors through the
//! module, and the module against the scripts: the same answers, stored values and counts on
//! random states, and both paths mixed on the same buckets.
//!
//! The servers are started by the test command (`./run-tests`, with `scripts/redis start module`
//! and `module-cluster`), which passes their addresses in `RL_REDIS_MODULE_URL` and
//! `RL_REDIS_MODULE_CLUSTER`; without them these tests fail, saying so. They need the
//! `redis-servers` feature (`./run-tests 1` turns it on), as tests/redis_store.rs.

#![cfg(feature = "redis-servers")]

mod conformance;
mod servers;

use conformance::{key, none, Backend, ManualClock, T0};
use proptest::prelude::*;
use ratelimit::core::bucket::{Kind as PolicyKind, Policy};
use ratelimit::core::decision::{Ask, Request};
use ratelimit::core::lease::LeaseToken;
use ratelimit::core::request::{Kind, Limit, Terms};
use ratelimit::core::subject::BucketKey;
use ratelimit::opslog::OpsLog;
use ratelimit::storage::redis::{RedisSettings, RedisStore, Target};
use ratelimit::storage::{system_clock, Clock, ErrorKind, Reports, Store};
use servers::OwnServer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

fn module_url() -> String {
    std::env::var("RL_REDIS_MODULE_URL").unwrap_or_else(|_| {
        panic!("RL_REDIS_MODULE_URL is not set: start a server with `scripts/redis start module DIR` and source DIR/env (./run-tests does)")
    })
}

fn fresh_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "rlmod:{}:{}:",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

struct Module {
    prefix: String,
    /// Seeds of a cluster whose nodes load the module; empty: the single server.
    cluster: Vec<String>,
}

impl Module {
    fn new() -> Self {
        Self {
            prefix: fresh_prefix(),
            cluster: Vec::new(),
        }
    }

    fn cluster() -> Self {
        let seeds = std::env::var("RL_REDIS_MODULE_CLUSTER").unwrap_or_else(|_| {
            panic!("RL_REDIS_MODULE_CLUSTER is not set: start one with `scripts/redis start module-cluster DIR` (./run-tests does)")
        });
        Self {
            prefix: fresh_prefix(),
            cluster: seeds.split(',').map(str::to_string).collect(),
        }
    }

    fn store(&self, host_clock: Option<Clock>) -> RedisStore {
        let url = if self.cluster.is_empty() {
            module_url()
        } else {
            String::new()
        };
        let settings = RedisSettings {
            target: Target::parse(&url, &self.cluster).unwrap(),
            prefix: self.prefix.clone(),
            timeout_ms: 2_000,
            flush_ms: 0,
        };
        RedisStore::new(settings, host_clock, system_clock(), OpsLog::none())
    }
}

impl Backend for Module {
    type S = RedisStore;
    fn open(&self, clock: Clock) -> RedisStore {
        let mut s = self.store(Some(clock));
        assert!(
            s.uses_module().unwrap(),
            "the server of RL_REDIS_MODULE_URL has no RL.* commands"
        );
        s
    }
}

mod module {
    use super::conformance;
    crate::conformance_suite!(super::Module::new());
}

mod module_cluster {
    use super::conformance;
    crate::conformance_suite!(super::Module::cluster());
}

fn admin() -> redis::Connection {
    redis::Client::open(module_url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The name of a key of `k` as the store lays it out: `<prefix>{<group>}<kind>:<name>`.
fn name(prefix: &str, k: &BucketKey, kind: &str, n: &[u8]) -> String {
    format!("{prefix}{{{}}}{kind}:{}", hex(&k.group), hex(n))
}

#[test]
fn a_server_with_the_module_is_detected_and_one_without_is_not() {
    let mut with = Module::new().store(None);
    assert!(with.uses_module().unwrap());
    let url = std::env::var("RL_REDIS_URL").expect("RL_REDIS_URL is not set (./run-tests sets it)");
    let settings = RedisSettings {
        target: Target::parse(&url, &[]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 2_000,
        flush_ms: 0,
    };
    let mut without = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    assert!(!without.uses_module().unwrap());
    assert!(!Module::new()
        .store(None)
        .scripts_only()
        .uses_module()
        .unwrap());
}

#[test]
fn the_module_decides_with_the_servers_clock_without_a_host_clock() {
    let m = Module::new();
    let mut s = m.store(None);
    let a = conformance::ask(2, 60_000, 0);
    assert_eq!(
        s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .remaining,
        1
    );
    let stored: String = redis::cmd("GET")
        .arg(name(&m.prefix, &key(1), "b", &key(1).bucket))
        .query(&mut admin())
        .unwrap();
    let stamp: i64 = stored.split(' ').nth(1).unwrap().parse().unwrap();
    let wall = (system_clock())();
    assert!((stamp - wall).abs() < 5_000, "stamp {stamp} vs wall {wall}");
}

#[test]
fn the_commands_declare_their_keys() {
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.ACQUIRE_ALL")
        .arg(4)
        .arg(&["b1", "b2", "l", "q"])
        .arg(&["", "2", "0", "", "0", "x", "0", "t", "0"])
        .arg(&["1", "1000", "1", "0", "1", "1000", "1", "0"])
        .query(&mut admin())
        .unwrap();
    assert_eq!(keys, ["b1", "b2", "l", "q"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.RELEASE")
        .arg(1)
        .arg("l")
        .arg("")
        .arg("id")
        .query(&mut admin())
        .unwrap();
    assert_eq!(keys, ["l"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.REFUND")
        .arg(1)
        .arg("b")
        .arg(&["", "5", "1000", "1", "0"])
        .query(&mut admin())
        .unwrap();
    assert_eq!(keys, ["b"]);
}

#[test]
fn a_damaged_bucket_is_replaced_and_fails_the_call_as_the_script_does() {
    let m = Module::new();
    let clock = ManualClock::at(T0);
    let mut s = m.store(Some(clock.clock()));
    let b = name(&m.prefix, &key(1), "b", &key(1).bucket);
    let _: () = redis::cmd("SET")
        .arg(&b)
        .arg("not a bucket")
        .query(&mut admin())
        .unwrap();
    let e = s
        .acquire(&key(1), &conformance::ask(5, 1_000, 0), 60_000, &mut none())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    let stored: String = redis::cmd("GET").arg(&b).query(&mut admin()).unwrap();
    assert_eq!(stored, format!("0 {T0} {} {T0} 0 0 0", T0 + 1_000));
}

/// `ask` for `limit` per minute under `kind`.
fn window_ask(kind: PolicyKind, limit: u64) -> Ask {
    Ask::new(Policy::new(limit, 60_000).unwrap().with_kind(kind), 1, 0)
}

/// Takes from key(7) until denied with `s`; how many were admitted (at most `limit + 1` calls).
fn admitted_by(s: &mut RedisStore, a: &Ask, limit: u64) -> u64 {
    (0..=limit)
        .map(|_| {
            u64::from(
                s.acquire(&key(7), a, 60_000, &mut none())
                    .unwrap()
                    .verdict
                    .allowed,
            )
        })
        .sum()
}

#[test]
fn a_window_written_by_the_scripts_is_read_as_a_window_by_the_module() {
    for kind in [PolicyKind::FixedWindow, PolicyKind::SlidingWindow] {
        let m = Module::new();
        let clock = ManualClock::at(T0);
        let mut script = m.store(Some(clock.clock())).scripts_only();
        let mut module = m.store(Some(clock.clock()));
        let a = window_ask(kind, 3);
        for _ in 0..2 {
            assert!(
                script
                    .acquire(&key(7), &a, 60_000, &mut none())
                    .unwrap()
                    .verdict
                    .allowed
            );
        }
        let b = name(&m.prefix, &key(7), "b", &key(7).bucket);
        let v: String = redis::cmd("GET").arg(&b).query(&mut admin()).unwrap();
        assert_eq!(
            v.split(' ').count(),
            9,
            "{kind:?}: a window's 9 fields: {v}"
        );
        // The window's 2 used tokens are not 2 held ones: 1 more, then denied.
        assert_eq!(admitted_by(&mut module, &a, 3), 1, "{kind:?}");
        let v: String = redis::cmd("GET").arg(&b).query(&mut admin()).unwrap();
        assert_eq!(
            v.split(' ').nth(7),
            Some(kind.code().to_string().as_str()),
            "{kind:?}: the module keeps the policy: {v}"
        );
        // A token bucket's call through the module converts the spent window (nothing
        // available), as the scripts do: a misread would find 3 tokens there.
        let tb = window_ask(PolicyKind::TokenBucket, 3);
        assert!(
            !module
                .acquire(&key(7), &tb, 60_000, &mut none())
                .unwrap()
                .verdict
                .allowed
        );
        let v: String = redis::cmd("GET").arg(&b).query(&mut admin()).unwrap();
        assert_eq!(
            v.split(' ').count(),
            7,
            "{kind:?}: a token bucket's 7 fields: {v}"
        );
    }
}

#[test]
fn a_window_written_by_the_module_is_read_as_a_window_by_the_scripts() {
    for kind in [PolicyKind::FixedWindow, PolicyKind::SlidingWindow] {
        let m = Module::new();
        let clock = ManualClock::at(T0);
        let mut module = m.store(Some(clock.clock()));
        let mut script = m.store(Some(clock.clock())).scripts_only();
        let a = window_ask(kind, 3);
        for _ in 0..2 {
            assert!(
                module
                    .acquire(&key(7), &a, 60_000, &mut none())
                    .unwrap()
                    .verdict
                    .allowed
            );
        }
        assert_eq!(admitted_by(&mut script, &a, 3), 1, "{kind:?}");
        // Peeks agree on the spent window, and so does a token bucket's call by the scripts.
        let p = a.policy;
        assert_eq!(
            module.peek(&key(7), &p, &mut none()).unwrap(),
            script.peek(&key(7), &p, &mut none()).unwrap(),
            "{kind:?}"
        );
        let tb = window_ask(PolicyKind::TokenBucket, 3);
        assert!(
            !script
                .acquire(&key(7), &tb, 60_000, &mut none())
                .unwrap()
                .verdict
                .allowed
        );
        // A minute on, the window (now a token bucket again) refilled: 3 by the module.
        clock.set(T0 + 60_000);
        assert_eq!(admitted_by(&mut module, &tb, 3), 3, "{kind:?}");
    }
}

/// A value crafted with instants near 2^63 (its stamp, its full-again instant) never overflows
/// (red team: in a debug build a panic after the write and before its replication, "internal
/// error"; in a release build a wrapped `PXAT` that deleted the key on replicas): past the
/// ranges ratelimit writes, it is damaged, replaced by an empty bucket with an expiry within
/// 2^53 ms, and the call fails.
#[test]
fn a_value_with_instants_near_2_63_is_replaced_with_an_expiry_within_bounds() {
    let clock = ManualClock::at(T0);
    let m = Module::new();
    let mut s = m.store(Some(clock.clock()));
    let mut c = admin();
    let a = Ask::new(Policy::new(10, 60_000).unwrap(), 1, 0);
    for (i, v) in [
        "0 9223372036854775000 9223372036854775000 0 0 0 0".to_string(),
        format!("5 {T0} 9223372036854775807 {T0} 0 0 0"),
    ]
    .into_iter()
    .enumerate()
    {
        let k = key(40 + i as u8);
        let b = name(&m.prefix, &k, "b", &k.bucket);
        let _: () = redis::cmd("SET").arg(&b).arg(&v).query(&mut c).unwrap();
        let r = s.acquire(&k, &a, 60_000, &mut none());
        assert_eq!(r.err().map(|e| e.kind()), Some(ErrorKind::Corrupt), "{v}");
        let ttl: i64 = redis::cmd("PTTL").arg(&b).query(&mut c).unwrap();
        assert!((1..=1i64 << 53).contains(&ttl), "{v}: PTTL {ttl}");
    }
}

#[test]
fn a_value_of_another_type_is_damaged_for_the_module_as_for_the_scripts() {
    // Another tenant's hash at a bucket's name, a list at its leases', a set at a request
    // record's: each call fails once as damaged, and both paths leave the same state.
    let clock = ManualClock::at(T0);
    let mut left = Vec::new();
    for by_module in [true, false] {
        let m = Module::new();
        let s = m.store(Some(clock.clock()));
        let mut s = if by_module { s } else { s.scripts_only() };
        let k = key(8);
        let mut c = admin();
        let b = name(&m.prefix, &k, "b", &k.bucket);
        let l = name(&m.prefix, &k, "l", &k.bucket);
        let _: () = redis::cmd("HSET")
            .arg(&b)
            .arg("f")
            .arg("v")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("RPUSH").arg(&l).arg("x").query(&mut c).unwrap();
        let a = Ask::new(Policy::new(2, 60_000).unwrap(), 1, 1);
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(match s.acquire(&k, &a, 60_000, &mut none()) {
                Ok(r) => format!("allowed {}", r.verdict.allowed),
                Err(e) => format!("{:?}", e.kind()),
            });
        }
        let v: String = redis::cmd("GET").arg(&b).query(&mut c).unwrap();
        let t: String = redis::cmd("TYPE").arg(&l).query(&mut c).unwrap();
        left.push((answers, v, t));
    }
    assert_eq!(left[0], left[1], "the module, then the scripts");
    assert_eq!(
        left[0].0,
        ["Corrupt", "Corrupt", "allowed false"],
        "the leases deleted, then the bucket replaced by an empty one"
    );
}

// ---- the module against the scripts ----

/// One step of a random run, the same for every store compared.
#[derive(Debug, Clone)]
enum Op {
    Advance(i64),
    Acquire {
        k: usize,
        kind: PolicyKind,
        limit: u64,
        per_ms: u64,
        cost: u64,
        inflight: u64,
        dry_run: bool,
        request: Option<(u8, u32)>,
    },
    /// `ratelimit_reserve()`: a longest wait in ms (`u64::MAX`: INF, a forced charge).
    Reserve {
        k: usize,
        kind: PolicyKind,
        limit: u64,
        per_ms: u64,
        cost: u64,
        max_wait: u64,
    },
    AcquireAll {
        ks: Vec<usize>,
        limits: Vec<(PolicyKind, u64, u64, u64, bool)>,
        inflight: u64,
        request: Option<(u8, u32)>,
    },
    Peek {
        k: usize,
        kind: PolicyKind,
        limit: u64,
        per_ms: u64,
    },
    Release(usize),
    Reset(usize),
    /// `ratelimit_refund()`.
    Refund {
        k: usize,
        kind: PolicyKind,
        limit: u64,
        per_ms: u64,
        cost: u64,
    },
}

/// Any policy: calls on one bucket change it now and then, as an operator's change would.
fn kind() -> impl Strategy<Value = PolicyKind> {
    proptest::sample::select(PolicyKind::ALL.to_vec())
}

fn op() -> impl Strategy<Value = Op> {
    let per = prop_oneof![Just(1_000u64), Just(60_000), 1u64..5_000];
    let request = proptest::option::of((0u8..3, 0u32..3));
    prop_oneof![
        (-3_000i64..20_000).prop_map(Op::Advance),
        (
            (0usize..3, kind()),
            1u64..6,
            per.clone(),
            1u64..3,
            0u64..3,
            any::<bool>(),
            request.clone()
        )
            .prop_map(
                |((k, kind), limit, per_ms, cost, inflight, dry_run, request)| Op::Acquire {
                    k,
                    kind,
                    limit,
                    per_ms,
                    cost,
                    inflight,
                    dry_run,
                    request
                }
            ),
        (
            proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3),
            proptest::collection::vec((kind(), 1u64..6, per.clone(), 1u64..3, any::<bool>()), 3),
            0u64..3,
            request,
        )
            .prop_map(|(ks, mut limits, inflight, request)| {
                limits.truncate(ks.len());
                Op::AcquireAll {
                    ks,
                    limits,
                    inflight,
                    request,
                }
            }),
        (
            (0usize..3, kind()),
            1u64..6,
            per.clone(),
            1u64..3,
            prop_oneof![0u64..8_000, Just(u64::MAX)]
        )
            .prop_map(|((k, kind), limit, per_ms, cost, max_wait)| Op::Reserve {
                k,
                kind,
                limit,
                per_ms,
                cost: cost.min(limit),
                max_wait
            }),
        (0usize..3, kind(), 1u64..6, per.clone()).prop_map(|(k, kind, limit, per_ms)| Op::Peek {
            k,
            kind,
            limit,
            per_ms
        }),
        (0usize..8).prop_map(Op::Release),
        (0usize..3).prop_map(Op::Reset),
        ((0usize..3, kind()), 1u64..6, per.clone(), 1u64..8).prop_map(
            |((k, kind), limit, per_ms, cost)| Op::Refund {
                k,
                kind,
                limit,
                per_ms,
                cost
            }
        ),
    ]
}

/// A stored value to start from: a token bucket in its 7 fields (tokens possibly above a small
/// policy's capacity, stamps around T0, counts), a window in its 9 (its policy's code and its
/// previous window's milli-tokens after them), a stepped bucket in its 9 (code 3, and its
/// booking's decision instant, or 0), or a value ratelimit did not write (a window's with a
/// policy code that does not exist among them, or one marked binary of a length no binary
/// value has).
fn start_value() -> impl Strategy<Value = Option<String>> {
    let fields =
        (0u64..7_000, -5_000i64..5_000, 0u64..4, 0u64..4, 0u64..4).prop_map(|(t, ds, a, d, i)| {
            format!(
                "{t} {} {} {} {a} {d} {i}",
                T0 + ds,
                T0 + ds + 1_000,
                T0 + ds
            )
        });
    proptest::option::of(prop_oneof![
        5 => fields.clone(),
        // A fixed window's length (0: written before lengths were kept).
        2 => (fields.clone(), prop_oneof![Just(0u64), 1u64..8_000]).prop_map(|(f, len)| format!("{f} 1 {len}")),
        2 => (fields.clone(), 0u64..7_000).prop_map(|(f, prev)| format!("{f} 2 {prev}")),
        1 => Just("garbage".to_string()),
        // A binary value's mark, not its length.
        1 => Just("\u{1}garbage".to_string()),
        2 => (fields, prop_oneof![Just(0u64), Just(T0 as u64 - 5)])
            .prop_map(|(f, prev)| format!("{f} 3 {prev}")),
        1 => Just(format!("0 {T0} {T0} {T0} 0 0 0 4 0")),
    ])
}

/// A text value in binary (bucket.lua's `format_bucket`), when it has 7 or 9 numbers.
fn binary_of(text: &str) -> Option<Vec<u8>> {
    let fields: Vec<i64> = text
        .split(' ')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if fields.len() != 7 && fields.len() != 9 {
        return None;
    }
    let mut v = vec![1u8];
    for f in fields {
        v.extend(f.to_le_bytes());
    }
    Some(v)
}

/// `values`, each in text or in binary: every path reads both, and writes the form it read.
fn in_either_form(
    values: impl Strategy<Value = Option<String>>,
) -> impl Strategy<Value = Option<Vec<u8>>> {
    (values, any::<bool>()).prop_map(|(v, binary)| {
        v.map(|v| match binary.then(|| binary_of(&v)).flatten() {
            Some(b) => b,
            None => v.into_bytes(),
        })
    })
}

/// The bucket `k` of the one subject of a run.
fn bucket(k: usize) -> BucketKey {
    BucketKey {
        bucket: [k as u8 + 1; 16],
        group: [0x77; 16],
        previous: None,
    }
}

/// `limit` per `per_ms` counted as `kind` says; a stepped bucket's amount from 1 to past the
/// limit, a function of the period (so that one bucket's calls vary it as they vary the period).
fn policy_of(kind: PolicyKind, limit: u64, per_ms: u64) -> Policy {
    Policy::new(limit, per_ms)
        .unwrap()
        .with_kind(kind)
        .with_amount(per_ms % (limit + 1) + 1)
        .unwrap()
}

fn ask_of(
    kind: PolicyKind,
    limit: u64,
    per_ms: u64,
    cost: u64,
    inflight: u64,
    dry_run: bool,
) -> Ask {
    Ask {
        dry_run,
        ..Ask::new(policy_of(kind, limit, per_ms), cost, inflight)
    }
}

fn with_request(mut a: Ask, kind: Kind, limits: &[Limit], request: Option<(u8, u32)>) -> Ask {
    a.request = request.map(|(name, replays)| Request {
        name: [name + 1; 16],
        ttl_ms: 30_000,
        terms: Terms::of(kind, limits, a.max_inflight),
        replays,
    });
    a
}

/// What a step answered, without what differs by nature between runs (lease ids are random).
fn run_op<S: Store>(s: &mut S, op: &Op, tokens: &mut Vec<LeaseToken>) -> String {
    let out = match op {
        Op::Advance(_) => return String::new(),
        Op::Acquire {
            k,
            kind,
            limit,
            per_ms,
            cost,
            inflight,
            dry_run,
            request,
        } => {
            let a = ask_of(*kind, *limit, *per_ms, *cost, *inflight, *dry_run);
            let l = [Limit {
                scope: "s",
                policy: a.policy,
                cost: *cost,
            }];
            let a = with_request(a, Kind::Acquire, &l, *request);
            s.acquire(&bucket(*k), &a, 5_000, &mut none()).map(|r| {
                tokens.extend(r.lease);
                format!("{:?} lease {}", r.verdict, r.lease.is_some())
            })
        }
        Op::Reserve {
            k,
            kind,
            limit,
            per_ms,
            cost,
            max_wait,
        } => {
            let a = ask_of(*kind, *limit, *per_ms, *cost, 0, false).reserving(*max_wait);
            s.acquire(&bucket(*k), &a, 5_000, &mut none())
                .map(|r| format!("{:?} lease {}", r.verdict, r.lease.is_some()))
        }
        Op::AcquireAll {
            ks,
            limits,
            inflight,
            request,
        } => {
            let mut asks: Vec<Ask> = limits
                .iter()
                .enumerate()
                .map(|(i, &(kind, l, p, c, d))| {
                    ask_of(kind, l, p, c, if i == 0 { *inflight } else { 0 }, d)
                })
                .collect();
            let scopes = ["a", "b", "c"];
            let ls: Vec<Limit> = asks
                .iter()
                .zip(scopes)
                .map(|(a, scope)| Limit {
                    scope,
                    policy: a.policy,
                    cost: a.cost,
                })
                .collect();
            asks[0] = with_request(asks[0], Kind::AcquireAll, &ls, *request);
            let keys: Vec<BucketKey> = ks.iter().map(|&k| bucket(k)).collect();
            s.acquire_all(&keys, &asks, 5_000, &mut none()).map(|r| {
                tokens.extend(r.lease);
                format!(
                    "{:?} {:?} reported {} lease {}",
                    r.verdict,
                    r.each,
                    r.reported,
                    r.lease.is_some()
                )
            })
        }
        Op::Peek {
            k,
            kind,
            limit,
            per_ms,
        } => s
            .peek(&bucket(*k), &policy_of(*kind, *limit, *per_ms), &mut none())
            .map(|v| format!("{v:?}")),
        Op::Release(i) => match tokens.get(*i) {
            Some(t) => s
                .release(&[*t], &mut none())
                .map(|n| format!("released {n}")),
            None => return "no token".into(),
        },
        Op::Reset(k) => s
            .reset(&bucket(*k), &mut none())
            .map(|b| format!("reset {b}")),
        Op::Refund {
            k,
            kind,
            limit,
            per_ms,
            cost,
        } => ratelimit::storage::StoreExt::refund(
            s,
            &bucket(*k),
            &Policy::new(*limit, *per_ms).unwrap().with_kind(*kind),
            *cost,
            &mut none(),
        )
        .map(|b| format!("refunded {b}")),
    };
    out.unwrap_or_else(|e| format!("error {:?}", e.kind()))
}

/// Everything a run left under `prefix`, by key name without the prefix: strings as they are,
/// sorted sets as their scores, hashes without the lease id they name (random).
fn state(prefix: &str) -> BTreeMap<String, String> {
    let mut c = admin();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut c)
        .unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query(&mut c).unwrap();
        let v = match t.as_str() {
            // Either form of a bucket (text, or binary: shown escaped).
            "string" => redis::cmd("GET")
                .arg(&k)
                .query::<Vec<u8>>(&mut c)
                .unwrap()
                .escape_ascii()
                .to_string(),
            "zset" => {
                let v: Vec<(String, String)> = redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(&mut c)
                    .unwrap();
                format!("{:?}", v.iter().map(|x| &x.1).collect::<Vec<_>>())
            }
            "hash" => {
                let mut v: BTreeMap<String, String> =
                    redis::cmd("HGETALL").arg(&k).query(&mut c).unwrap();
                if let Some(l) = v.get_mut("l") {
                    *l = format!("lease {}", !l.is_empty());
                }
                format!("{v:?}")
            }
            other => other.to_string(),
        };
        out.insert(k[prefix.len()..].to_string(), v);
    }
    out
}

/// Sets the starting values of the three buckets under `prefix`.
fn seed<V: AsRef<[u8]>>(prefix: &str, start: &[Option<V>]) {
    let mut c = admin();
    for (k, v) in start.iter().enumerate() {
        if let Some(v) = v {
            let _: () = redis::cmd("SET")
                .arg(name(prefix, &bucket(k), "b", &bucket(k).bucket))
                .arg(v.as_ref())
                .arg("PX")
                .arg(600_000)
                .query(&mut c)
                .unwrap();
        }
    }
}

/// Runs `ops` on stores of their own prefix: the module only, the EVALSHA scripts only, the
/// Function (the scripts' path where the server has Functions, the module ruled out) only, and
/// each step by one of the three (`by`: 0 module, 1 scripts, 2 Function); compares each one's
/// answers and what it left.
fn compare<V: AsRef<[u8]>>(start: &[Option<V>], ops: &[(Op, u8)]) {
    let clock = ManualClock::at(T0);
    let (m, sc, f, mixed) = (Module::new(), Module::new(), Module::new(), Module::new());
    for b in [&m, &sc, &f, &mixed] {
        seed(&b.prefix, start);
    }
    let mut module = m.store(Some(clock.clock()));
    assert!(module.uses_module().unwrap());
    let mut script = sc.store(Some(clock.clock())).scripts_only();
    let mut function = f.store(Some(clock.clock())).without_module();
    assert!(function.uses_functions().unwrap());
    let mut mixed_by = [
        mixed.store(Some(clock.clock())),
        mixed.store(Some(clock.clock())).scripts_only(),
        mixed.store(Some(clock.clock())).without_module(),
    ];
    let (mut tm, mut ts, mut tf, mut tx) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut now = T0;
    for (i, (op, by)) in ops.iter().enumerate() {
        if let Op::Advance(dt) = op {
            now += dt;
            clock.set(now);
            continue;
        }
        let a = run_op(&mut module, op, &mut tm);
        let b = run_op(&mut script, op, &mut ts);
        let c = run_op(&mut function, op, &mut tf);
        let x = run_op(&mut mixed_by[usize::from(*by % 3)], op, &mut tx);
        assert_eq!(a, b, "step {i} {op:?}: module, then scripts");
        assert_eq!(a, c, "step {i} {op:?}: module, then the Function");
        assert_eq!(a, x, "step {i} {op:?}: module, then mixed");
    }
    let (a, b) = (state(&m.prefix), state(&sc.prefix));
    let (c, x) = (state(&f.prefix), state(&mixed.prefix));
    assert_eq!(a, b, "stored by the module, then by the scripts");
    assert_eq!(a, c, "stored by the module, then by the Function");
    assert_eq!(a, x, "stored by the module, then by all three");
}

/// A bucket's value in text: a binary one decoded (bucket.lua's `format_bucket` forms).
fn as_text(v: &[u8]) -> String {
    if v.first() == Some(&1) && (v.len() == 57 || v.len() == 73) {
        let n: Vec<String> = v[1..]
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()).to_string())
            .collect();
        return n.join(" ");
    }
    String::from_utf8_lossy(v).into_owned()
}

/// What a run left under `prefix` (see `state`), each bucket in text.
fn state_in_text(prefix: &str) -> BTreeMap<String, String> {
    let mut c = admin();
    let mut out = state(prefix);
    let names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*}}b:*"))
        .query(&mut c)
        .unwrap();
    for k in names {
        let v: Vec<u8> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
        out.insert(k[prefix.len()..].to_string(), as_text(&v));
    }
    out
}

/// Runs `ops` on the module (which writes new buckets in text), and on the scripts and the
/// Function of a host writing them in binary (`ratelimit.redis_value_form = binary`): the same
/// answers, and the same state once each bucket is read in text.
fn compare_value_forms(start: &[Option<Vec<u8>>], ops: &[Op]) {
    let clock = ManualClock::at(T0);
    let (m, sc, f) = (Module::new(), Module::new(), Module::new());
    for b in [&m, &sc, &f] {
        seed(&b.prefix, start);
    }
    let mut module = m.store(Some(clock.clock()));
    assert!(module.uses_module().unwrap());
    let mut script = sc
        .store(Some(clock.clock()))
        .scripts_only()
        .writing_binary_values();
    let mut function = f
        .store(Some(clock.clock()))
        .without_module()
        .writing_binary_values();
    assert!(function.uses_functions().unwrap());
    let (mut tm, mut ts, mut tf) = (Vec::new(), Vec::new(), Vec::new());
    let mut now = T0;
    for (i, op) in ops.iter().enumerate() {
        if let Op::Advance(dt) = op {
            now += dt;
            clock.set(now);
            continue;
        }
        let a = run_op(&mut module, op, &mut tm);
        assert_eq!(
            a,
            run_op(&mut script, op, &mut ts),
            "step {i} {op:?}: the scripts"
        );
        assert_eq!(
            a,
            run_op(&mut function, op, &mut tf),
            "step {i} {op:?}: the Function"
        );
    }
    let a = state_in_text(&m.prefix);
    assert_eq!(
        a,
        state_in_text(&sc.prefix),
        "by the module, then the binary scripts"
    );
    assert_eq!(
        a,
        state_in_text(&f.prefix),
        "by the module, then the binary Function"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A host writing new buckets in binary answers as a text one, on any start and any run of
    /// calls, and stores the same numbers.
    #[test]
    fn a_host_writing_binary_values_answers_and_stores_as_a_text_one(
        start in proptest::collection::vec(in_either_form(start_value()), 3),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        compare_value_forms(&start, &ops);
    }

    /// On any starting state and any run of calls (reservations and forced charges among
    /// them), the module answers, stores and counts as the scripts and the Function do, and
    /// the three mixed call by call on the same buckets too.
    #[test]
    fn the_module_answers_and_stores_as_the_scripts(
        start in proptest::collection::vec(in_either_form(start_value()), 3),
        ops in proptest::collection::vec((op(), 0u8..3), 1..40),
    ) {
        compare(&start, &ops);
    }
}

#[test]
fn half_the_calls_by_the_module_and_half_by_the_scripts_admit_exactly_the_limit() {
    let m = Module::new();
    let clock = ManualClock::at(T0);
    let mut by_module = m.store(Some(clock.clock()));
    let mut by_script = m.store(Some(clock.clock())).scripts_only();
    let a = conformance::ask(10, 60_000, 0);
    let k = key(3);
    let mut admitted = 0;
    for i in 0..40 {
        let s = if i % 2 == 0 {
            &mut by_module
        } else {
            &mut by_script
        };
        admitted += u64::from(
            s.acquire(&k, &a, 60_000, &mut none())
                .unwrap()
                .verdict
                .allowed,
        );
    }
    assert_eq!(admitted, 10);
    // 6 s later: exactly one token more, whichever path asks.
    clock.set(T0 + 6_000);
    assert!(
        by_script
            .acquire(&k, &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    assert!(
        !by_module
            .acquire(&k, &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    let s = by_module.stats().unwrap();
    assert_eq!((s.counters.allowed, s.counters.denied_rate), (11, 31));
}

#[test]
fn a_cluster_node_redirects_a_command_for_another_nodes_slot() {
    // The keys are declared: a node that does not serve the key's slot answers MOVED, as for
    // any command, instead of deciding on a bucket that is not its own.
    let mut answered = 0;
    let mut moved = 0;
    for seed in Module::cluster().cluster {
        let mut c = redis::Client::open(seed).unwrap().get_connection().unwrap();
        let r: redis::RedisResult<redis::Value> = redis::cmd("RL.PEEK")
            .arg(1)
            .arg("rl-module-moved-test")
            .arg("")
            .query(&mut c);
        match r {
            Ok(_) => answered += 1,
            Err(e) if e.to_string().to_ascii_uppercase().contains("MOVED") => moved += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((answered, moved), (1, 2));
}

/// The module's file, as run-tests builds it (RL_REDIS_MODULE_SO), else cargo's release build.
fn module_so() -> String {
    std::env::var("RL_REDIS_MODULE_SO").unwrap_or_else(|_| {
        let so = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/libratelimit_redis.so");
        assert!(
            std::path::Path::new(so).exists(),
            "RL_REDIS_MODULE_SO is not set and {so} is missing: cargo build --release -p ratelimit-redis"
        );
        so.to_string()
    })
}

#[test]
fn a_server_restarted_with_the_module_is_used_from_the_next_connection() {
    // A rolling upgrade: the store decided with the scripts; its server comes back with the
    // module. The call that meets the lost connection fails (nothing decided), the next one
    // asks again and uses the native commands.
    let dir = tempfile::tempdir().unwrap();
    let plain = OwnServer::start(dir.path(), &[]);
    let settings = RedisSettings {
        target: Target::parse(&format!("unix://{}/redis.sock", dir.path().display()), &[]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 2_000,
        flush_ms: 0,
    };
    let clock = ManualClock::at(T0);
    let mut s = RedisStore::new(
        settings,
        Some(clock.clock()),
        system_clock(),
        OpsLog::none(),
    );
    let a = conformance::ask(3, 60_000, 0);
    assert!(
        s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    assert!(!s.uses_module().unwrap(), "a plain server: the scripts");
    drop(plain);
    let _with = OwnServer::start(dir.path(), &["--loadmodule", &module_so()]);
    assert!(
        s.acquire(&key(1), &a, 60_000, &mut none()).is_err(),
        "the lost connection"
    );
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert_eq!(
        (v.allowed, v.remaining),
        (true, 2),
        "a new server without persistence"
    );
    assert!(
        s.uses_module().unwrap(),
        "the native commands, found at the new connection"
    );
}

/// A reservation on a server with Functions and without the module (a managed service) books
/// as on the other paths: the Function decides plain calls only.
#[test]
fn a_reservation_on_the_function_path_books_ahead() {
    let f = Module::new();
    let clock = ManualClock::at(T0);
    let mut s = f.store(Some(clock.clock())).without_module();
    assert!(s.uses_functions().unwrap());
    let a = ask_of(PolicyKind::TokenBucket, 1, 1_000, 1, 0, false);
    assert!(
        s.acquire(&bucket(0), &a, 5_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    let v = s
        .acquire(&bucket(0), &a.reserving(5_000), 5_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!((v.allowed, v.wait_ms, v.reserved), (true, 1_000, 1));
}

/// A debt booked by forced charges far ahead. At the largest stamp ratelimit writes
/// (MAX_BOOKED), one more forced charge books, and a plain call is still denied after it; a
/// value stamped past it (near the largest i64, which only a foreign writer makes) is damaged:
/// the charge fails, the bucket is replaced by an empty one, and a plain call is denied. No path
/// wraps a debt around to the far past, which would read as a full bucket (tokens minted).
#[test]
fn a_forced_charge_past_the_largest_stamp_never_wraps_the_debt_around() {
    let booked = 1i64 << 52;
    for (start, books) in [
        (format!("0 {booked} {booked} {T0} 0 0 0 0 {T0}"), true),
        (
            format!("0 9223372036000000000 9223372036854775807 {T0} 0 0 0 0 {T0}"),
            false,
        ),
    ] {
        for by in 0..2 {
            let m = Module::new();
            seed(&m.prefix, &[Some(&start)]);
            let clock = ManualClock::at(T0);
            let mut s = m.store(Some(clock.clock()));
            if by == 1 {
                s = s.scripts_only();
            }
            let a = ask_of(PolicyKind::TokenBucket, 1, 1_000_000_000_000, 1, 0, false);
            let forced = s.acquire(&bucket(0), &a.reserving(u64::MAX), 5_000, &mut none());
            match forced {
                Ok(f) => assert!(books && f.verdict.allowed, "path {by}: {start}: {f:?}"),
                Err(e) => assert!(!books && e.kind() == ErrorKind::Corrupt, "path {by}: {e}"),
            }
            let plain = s
                .acquire(&bucket(0), &a, 5_000, &mut none())
                .unwrap()
                .verdict;
            assert!(!plain.allowed, "path {by} (0 module, 1 scripts): {plain:?}");
        }
    }
}

/// A stepped debt booked up to MAX_BOOKED (a reservation of 10^12 tokens at one a step),
/// then a token bucket of the largest limit per millisecond on the same bucket: the debt
/// converted is reported alike on every path (the scripts answered `reserved` 2^63).
#[test]
fn a_converted_debt_up_to_max_booked_is_reported_alike_on_every_path() {
    let start = [
        None,
        Some(format!(
            "0 {b} {} {b} 0 0 0 3 {}",
            (1i64 << 52) + 1_000,
            T0 - 5,
            b = 1i64 << 52
        )),
        None,
    ];
    let op = Op::Acquire {
        k: 1,
        kind: PolicyKind::TokenBucket,
        limit: 999_999_999_999,
        per_ms: 1,
        cost: 1,
        inflight: 0,
        dry_run: false,
        request: None,
    };
    compare(&start, &[(op, 1)]);
}
/// Calls at the extremes: limits and periods up to 10^12 (a stepped bucket's amount a function
/// of them, up to 10^12), forced charges of the whole limit, clocks moving by up to 10^14 ms
/// (staying below MAX_BOOKED, where the scripts' doubles are exact: a clock past 2^53 ms, the
/// year 287,000, is not).
fn extreme_op() -> impl Strategy<Value = Op> {
    let big = prop_oneof![
        Just(1u64),
        Just(999_999_999_999u64),
        Just(1_000_000_000_000),
        1u64..=1_000_000_000_000,
        1u64..10
    ];
    let per = prop_oneof![
        Just(1u64),
        Just(999_999_999_999u64),
        1u64..=999_999_999_999,
        1u64..5_000
    ];
    let kind = prop_oneof![4 => Just(PolicyKind::SteppedBucket), 1 => kind()];
    prop_oneof![
        prop_oneof![
            -3_000i64..20_000,
            Just(1_000_000_000_000i64),
            0i64..100_000_000_000_000
        ]
        .prop_map(Op::Advance),
        ((0usize..3, kind.clone()), big.clone(), per.clone(), 1u64..4).prop_map(
            |((k, kind), limit, per_ms, cost)| Op::Acquire {
                k,
                kind,
                limit,
                per_ms,
                cost: cost.min(limit),
                inflight: 0,
                dry_run: false,
                request: None
            }
        ),
        (
            (0usize..3, kind.clone()),
            big.clone(),
            per.clone(),
            prop_oneof![1u64..4, Just(1_000_000_000_000u64)],
            prop_oneof![0u64..8_000, Just(u64::MAX)]
        )
            .prop_map(|((k, kind), limit, per_ms, cost, max_wait)| Op::Reserve {
                k,
                kind,
                limit,
                per_ms,
                cost: cost.min(limit),
                max_wait
            }),
        ((0usize..3, kind), big, per).prop_map(|((k, kind), limit, per_ms)| Op::Peek {
            k,
            kind,
            limit,
            per_ms
        }),
    ]
}

/// Stored values at the extremes: stamps up to MAX_BOOKED, tokens up to 10^15 milli-tokens,
/// a debt's decision before or after the clock, under every policy.
fn extreme_start() -> impl Strategy<Value = Option<String>> {
    let max_booked = 1i64 << 52;
    let stamp = prop_oneof![
        Just(T0),
        Just(max_booked),
        Just(max_booked - 1),
        T0..max_booked,
        (T0 - 5_000)..(T0 + 5_000)
    ];
    let tokens = prop_oneof![
        Just(0u64),
        0u64..7_000,
        Just(999_999_999_999_000u64),
        Just(1_000_000_000_000_000u64),
        0u64..1_000_000_000_000_000
    ];
    proptest::option::of(
        (
            tokens,
            stamp,
            0u8..4,
            prop_oneof![Just(0u64), Just(T0 as u64 - 5), Just(T0 as u64 + 5)],
        )
            .prop_map(|(t, s, k, prev)| {
                let base = format!("{t} {s} {} {s} 0 0 0", s.saturating_add(1_000));
                match k {
                    0 => base,
                    1 => format!("{base} 1 {}", prev % 8_000),
                    2 => format!("{base} 2 {}", t / 2),
                    _ => format!("{base} 3 {prev}"),
                }
            }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The module answers and stores as the scripts and the Function on extreme states and
    /// calls (found: a converted debt's `reserved`, see
    /// a_converted_debt_up_to_max_booked_is_reported_alike_on_every_path).
    #[test]
    fn the_module_answers_and_stores_as_the_scripts_at_the_extremes(
        start in proptest::collection::vec(in_either_form(extreme_start()), 3),
        ops in proptest::collection::vec((extreme_op(), 0u8..3), 1..30),
    ) {
        compare(&start, &ops);
    }
}

/// One command to a server of a test's own by its `unix://` url: its reply, or its error as text.
fn own_cmd(url: &str, args: &[&str]) -> Result<redis::Value, String> {
    let mut c = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(|e| format!("no connection: {e}"))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c).map_err(|e| e.to_string())
}

/// A `numkeys` so large that `2 + numkeys` does not fit a usize (red team): the server crashed
/// (a panic outside the module's guard aborts redis-server: "attempt to add with overflow" in a
/// debug build, "mid > len" in a release one), taking every tenant's data with it.
#[test]
fn a_numkeys_past_any_argument_count_is_a_wrong_arity_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let own = OwnServer::start(dir.path(), &["--loadmodule", &module_so()]);
    for numkeys in [
        "18446744073709551615",
        "18446744073709551614",
        "9223372036854775807",
    ] {
        for command in [
            "RL.ACQUIRE",
            "RL.ACQUIRE_ALL",
            "RL.PEEK",
            "RL.RELEASE",
            "RL.RESET",
            "RL.REFUND",
        ] {
            let e = own_cmd(&own.url, &[command, numkeys, "k", "", "10", "1000", "1"]).unwrap_err();
            assert!(
                e.contains("wrong number of arguments"),
                "{command} {numkeys}: {e}"
            );
            assert_eq!(
                own_cmd(&own.url, &["PING"]),
                Ok(redis::Value::SimpleString("PONG".into())),
                "the server after {command} {numkeys}"
            );
        }
    }
}

/// A cost whose milli-tokens do not fit 64 bits (red team): a release build of the module
/// wrapped `cost * 1000` around to a few milli-tokens, or none (2^63), and admitted the call on
/// a bucket of 10, where the scripts deny it; a debug build panicked ("internal error"). A cost
/// past the largest limit is refused as out of bounds, whatever the build.
#[test]
fn a_cost_past_the_largest_limit_is_refused_not_wrapped_into_an_admission() {
    let dir = tempfile::tempdir().unwrap();
    let own = OwnServer::start(dir.path(), &["--loadmodule", &module_so()]);
    for cost in [
        "9223372036854775808",
        "18446744073709552",
        "18446744073709551615",
        "1000000000001",
    ] {
        let short = ["RL.ACQUIRE", "1", "{t}b", "", "10", "1000", cost];
        let full = [
            "RL.ACQUIRE",
            "3",
            "{t}b",
            "{t}l",
            "{t}q",
            "",
            "10",
            "1000",
            cost,
            "0",
            "0",
            "",
            "0",
            "0",
            "",
            "",
            "0",
            "0",
        ];
        let all = [
            "RL.ACQUIRE_ALL",
            "3",
            "{t}b",
            "{t}l",
            "{t}q",
            "",
            "1",
            "0",
            "",
            "0",
            "",
            "0",
            "",
            "0",
            "10",
            "1000",
            cost,
            "0",
            "0",
        ];
        for args in [&short[..], &full[..], &all[..]] {
            let _ = own_cmd(&own.url, &["DEL", "{t}b", "{t}l", "{t}q"]);
            let r = own_cmd(&own.url, args);
            let e = r.as_ref().expect_err(&format!("{args:?}: {r:?}"));
            assert!(e.contains("out of bounds"), "{args:?}: {e}");
        }
    }
}

/// One plain acquire (10 a second, cost 1) on a bucket holding `v`: every path answers and
/// stores alike (`compare`).
fn one_plain_acquire_from<V: AsRef<[u8]>>(v: V) {
    let acquire = Op::Acquire {
        k: 0,
        kind: PolicyKind::TokenBucket,
        limit: 10,
        per_ms: 1_000,
        cost: 1,
        inflight: 0,
        dry_run: false,
        request: None,
    };
    compare(&[Some(v), None, None], &[(acquire, 0)]);
}

/// One acquire (cost 1, 10 a second, counted as `kind`) by one path (0 module, 1 scripts, 2
/// Function) on a bucket holding `start`: the answer, and the value left.
fn acquire_by(path: u8, kind: PolicyKind, start: &[u8]) -> (String, Vec<u8>) {
    let clock = ManualClock::at(T0 + 500);
    let m = Module::new();
    seed(&m.prefix, &[Some(start)]);
    let mut s = match path {
        0 => m.store(Some(clock.clock())),
        1 => m.store(Some(clock.clock())).scripts_only(),
        _ => m.store(Some(clock.clock())).without_module(),
    };
    let acquire = Op::Acquire {
        k: 0,
        kind,
        limit: 10,
        per_ms: 1_000,
        cost: 1,
        inflight: 0,
        dry_run: false,
        request: None,
    };
    let answer = run_op(&mut s, &acquire, &mut Vec::new());
    let left: Vec<u8> = redis::cmd("GET")
        .arg(name(&m.prefix, &bucket(0), "b", &bucket(0).bucket))
        .query(&mut admin())
        .unwrap();
    (answer, left)
}

/// A bucket in binary (the form a later build writes) is decided by every path as the same
/// bucket in text, and written back in binary, the same numbers: hosts reading either form
/// share it.
#[test]
fn a_binary_bucket_is_decided_as_its_text_and_stays_binary_on_every_path() {
    for (kind, text) in [
        (
            PolicyKind::TokenBucket,
            format!("4000 {T0} {} {T0} 1 2 3", T0 + 600),
        ),
        (
            PolicyKind::SlidingWindow,
            format!("4000 {T0} {} {T0} 1 2 3 2 3000", T0 + 600),
        ),
    ] {
        for path in 0..3 {
            let (a, t) = acquire_by(path, kind, text.as_bytes());
            let (b, bin) = acquire_by(path, kind, &binary_of(&text).unwrap());
            assert_eq!(a, b, "path {path}, {text}: the answers");
            let t = String::from_utf8(t).unwrap();
            assert_eq!(bin, binary_of(&t).unwrap(), "path {path}: {t} in binary");
        }
    }
}

/// A binary count at its largest saturates there, and a binary value with a number out of its
/// range (a stamp past MAX_BOOKED included) is damaged, alike on every path (the Function's fast
/// path included).
#[test]
fn a_binary_value_at_and_past_its_ranges_is_decided_alike_on_every_path() {
    let max = (1i64 << 53) - 1;
    for fields in [
        [4_000, T0, T0, T0, max, 2, 3],
        [4_000, T0, T0, T0, 1, max, max],
        [0, T0, T0, T0, 1, max, 3],
        [max, -(1 << 52), max, -max, 0, 0, 0],
        [0, 1 << 52, max, T0, 1, 2, 3],
        // Past MAX_BOOKED, where the scripts' arithmetic in doubles is no longer the core's
        // (red team 2: the answers were 1 ms apart, a refund's bytes differed).
        [0, (1 << 52) + 1, max, T0, 1, 2, 3],
        [0, max - 2, max - 1, T0, 1, 2, 3],
        [-1, T0, T0, T0, 1, 2, 3],
        [4_000, max + 1, T0, T0, 1, 2, 3],
        [4_000, T0, -max - 1, T0, 1, 2, 3],
        [4_000, T0, T0, i64::MIN, 1, 2, 3],
        [4_000, T0, T0, T0, -1, 2, 3],
        [4_000, T0, T0, T0, 1, max + 1, 3],
        [4_000, T0, T0, T0, 1, 2, i64::MAX],
    ] {
        let text: Vec<String> = fields.iter().map(i64::to_string).collect();
        one_plain_acquire_from(binary_of(&text.join(" ")).unwrap());
    }
}

/// A refund on a binary bucket stamped at MAX_BOOKED (nothing given back) and past it (damaged)
/// is alike on every path (red team 2: past it, the bytes written back differed).
#[test]
fn a_refund_on_a_binary_bucket_at_and_past_max_booked_is_alike_on_every_path() {
    let max = (1i64 << 53) - 1;
    let refund = Op::Refund {
        k: 0,
        kind: PolicyKind::TokenBucket,
        limit: 10,
        per_ms: 1_000,
        cost: 1,
    };
    for stamp in [1 << 52, max - 2] {
        let text = format!("0 {stamp} {} {T0} 1 2 3", max - 1);
        compare(&[binary_of(&text), None, None], &[(refund.clone(), 0)]);
    }
}

/// A stored value whose numbers are past 64 bits, or past an i64 in a signed field, is damaged
/// on every path (red team: the scripts read it in doubles and admitted, the module called it
/// damaged; broken storage is a denial): past the ranges ratelimit writes, as in binary.
#[test]
fn a_value_with_numbers_past_64_bits_is_damaged_alike_for_the_scripts_and_the_module() {
    for v in [
        format!("99999999999999999999 {T0} {T0} {T0} 1 2 3"),
        format!("1000 -9223372036854775809 {T0} {T0} 1 2 3"),
        format!("1000 {T0} 99999999999999999999 {T0} 1 2 3"),
        format!("1000 {T0} {T0} {T0} 99999999999999999999 2 3"),
        format!("1000 {T0} {T0} {T0} 1 2 3 2 99999999999999999999"),
    ] {
        one_plain_acquire_from(v);
    }
}

/// Numbers of 16 characters or more leave the Function's fast path for the general way, which
/// checks their range: at the largest stored number they are decided, one past it they are
/// damaged, alike on every path.
#[test]
fn a_text_value_at_and_past_the_largest_stored_number_is_decided_alike_on_every_path() {
    let (max, booked) = ((1i64 << 53) - 1, 1i64 << 52);
    for v in [
        format!("1000000000000000 {T0} {T0} {T0} 1 2 3"),
        format!("{max} {T0} {T0} {T0} 1 2 3"),
        format!("1000 {booked} {max} -{max} 1 2 3"),
        format!("1000 -{booked} {T0} {T0} 1 2 3"),
        format!("{} {T0} {T0} {T0} 1 2 3", max + 1),
        format!("1000 {} {T0} {T0} 1 2 3", booked + 1),
        format!("1000 {T0} {} {T0} 1 2 3", max + 1),
        format!("1000 {T0} {T0} -{} 1 2 3", max + 1),
    ] {
        one_plain_acquire_from(v);
    }
}

/// The Function's token bucket fast path carries the counts it does not change as the strings
/// it read; a count not in the form every path writes (leading zeros, or past 15 digits, where
/// a double is no longer exact) goes the general way, so that the stored value is the module's
/// and the scripts' byte for byte (red team: "007" was written back as read, "7" by the others).
#[test]
fn a_count_with_leading_zeros_is_stored_alike_by_the_function_and_the_module() {
    for v in [
        format!("1000 {T0} {T0} {T0} 1 2 007"),
        format!("1000 {T0} {T0} {T0} 1 02 3"),
        format!("0 {T0} {T0} {T0} 01 2 3"),
        format!("1000 {T0} {T0} {T0} 1 2 1234567890123456"),
    ] {
        one_plain_acquire_from(v);
    }
}

/// A count at u64::MAX (allowed, rate-denied) in a crafted value is no internal error for any
/// form of the module's commands (red team: `+= 1` panicked in a debug build, "internal
/// error", and wrapped the count to 0 in a release one); it is past the ranges ratelimit
/// writes, so the value is damaged (a_value_with_numbers_past_64_bits_is_damaged_alike...).
#[test]
fn a_count_at_u64_max_is_no_internal_error() {
    let url = module_url();
    let k = format!("{}rt3:count", fresh_prefix());
    for v in [
        "5000 0 0 0 18446744073709551615 0 0",
        "0 1000 0 0 0 18446744073709551615 0",
    ] {
        own_cmd(&url, &["SET", &k, v]).unwrap();
        let r = own_cmd(&url, &["RL.ACQUIRE", "1", &k, "1000", "10", "60000", "1"]);
        assert!(
            !matches!(&r, Err(e) if e.contains("internal error")),
            "{v}: {r:?}"
        );
    }
    // The same by RL.ACQUIRE_ALL and by RL.ACQUIRE's long form (a slot, a lease).
    let hex = "0123456789abcdef0123456789abcdef";
    let (b, l, q) = (
        format!("{k}{{x}}b"),
        format!("{k}{{x}}l"),
        format!("{k}{{x}}r"),
    );
    let v = "5000 0 0 0 18446744073709551615 0 0";
    own_cmd(&url, &["SET", &b, v]).unwrap();
    let r = own_cmd(
        &url,
        &[
            "RL.ACQUIRE_ALL",
            "3",
            &b,
            &l,
            &q,
            "1000",
            "1",
            "0",
            "lease1",
            "0",
            hex,
            "0",
            hex,
            "1",
            "10",
            "60000",
            "1",
            "0",
            "0",
        ],
    );
    assert!(
        !matches!(&r, Err(e) if e.contains("internal error")),
        "ACQUIRE_ALL {v}: {r:?}"
    );
    own_cmd(&url, &["SET", &b, v]).unwrap();
    let r = own_cmd(
        &url,
        &[
            "RL.ACQUIRE",
            "3",
            &b,
            &l,
            &q,
            "1000",
            "10",
            "60000",
            "1",
            "5",
            "1000",
            "lease1",
            "0",
            "0",
            hex,
            hex,
            "1",
            "0",
        ],
    );
    assert!(
        !matches!(&r, Err(e) if e.contains("internal error")),
        "ACQUIRE 3 {v}: {r:?}"
    );
}
