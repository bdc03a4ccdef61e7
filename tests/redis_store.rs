//! The Redis store against real redis-server processes: the conformance suite every store
//! passes, on a single server and on a 3-master cluster, then what only Redis has (the exact
//! Lua arithmetic, the server's clock, the key layout).
//!
//! The servers are started by the test command (`./run-tests`, with `scripts/redis start`),
//! which passes their addresses in `RL_REDIS_URL` and `RL_REDIS_CLUSTER`. Without them these
//! tests fail, saying so: they are never skipped silently. They need the `redis-servers` feature
//! (`./run-tests 1` turns it on), so that `cargo test` alone passes on a machine without them.

#![cfg(feature = "redis-servers")]

mod conformance;
mod servers;

use conformance::{ask, key, none, Backend, ManualClock, T0};
use proptest::prelude::*;
use ratelimit::core::keyswitch::{KeyRecord, STAMP_NOW};
use ratelimit::opslog::OpsLog;
use ratelimit::storage::redis::{RedisSettings, RedisStore, Target};
use ratelimit::storage::{system_clock, Batching, Clock, ErrorKind, KeyRecords, Reports, Store};
use servers::OwnServer;
use std::sync::atomic::{AtomicU64, Ordering};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start servers with `scripts/redis start single|cluster DIR` and source DIR/env (./run-tests does)")
    })
}

/// A prefix no other test uses, so that tests share a server without sharing keys.
fn fresh_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "rltest:{}:{}:",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

struct Redis {
    url: String,
    cluster: Vec<String>,
    prefix: String,
}

impl Redis {
    fn single() -> Self {
        Self {
            url: env("RL_REDIS_URL"),
            cluster: Vec::new(),
            prefix: fresh_prefix(),
        }
    }

    fn cluster() -> Self {
        Self {
            url: String::new(),
            cluster: env("RL_REDIS_CLUSTER")
                .split(',')
                .map(str::to_string)
                .collect(),
            prefix: fresh_prefix(),
        }
    }

    fn store(&self, host_clock: Option<Clock>) -> RedisStore {
        let settings = RedisSettings {
            target: Target::parse(&self.url, &self.cluster).unwrap(),
            prefix: self.prefix.clone(),
            timeout_ms: 2_000,
            // Counts at every step, as the suite's other connections expect them at once;
            // `counts_are_batched_and_none_is_lost` tests the batching.
            flush_ms: 0,
        };
        RedisStore::new(settings, host_clock, system_clock(), OpsLog::none())
    }
}

impl Backend for Redis {
    type S = RedisStore;
    fn open(&self, clock: Clock) -> RedisStore {
        self.store(Some(clock))
    }
}

mod single {
    use super::conformance;
    crate::conformance_suite!(super::Redis::single());
}

mod cluster {
    use super::conformance;
    crate::conformance_suite!(super::Redis::cluster());
}

/// The EVALSHA scripts alone (the stores above take the Function for a plain acquire, Redis
/// 7.0 having Functions): what a server without Functions runs.
struct Scripts(Redis);

impl Backend for Scripts {
    type S = RedisStore;
    fn open(&self, clock: Clock) -> RedisStore {
        self.0.store(Some(clock)).scripts_only()
    }
}

mod single_scripts {
    use super::conformance;
    crate::conformance_suite!(super::Scripts(super::Redis::single()));
}

/// The Function, asserted to be the path taken (the suite's plain calls go by it).
struct Functions(Redis);

impl Backend for Functions {
    type S = RedisStore;
    fn open(&self, clock: Clock) -> RedisStore {
        let mut s = self.0.store(Some(clock));
        assert!(s.uses_functions().unwrap(), "the server has no Functions");
        s
    }
}

mod single_functions {
    use super::conformance;
    crate::conformance_suite!(super::Functions(super::Redis::single()));
}

mod cluster_functions {
    use super::conformance;
    crate::conformance_suite!(super::Functions(super::Redis::cluster()));
}

/// A host writing new buckets in binary (`ratelimit.redis_value_form = binary`): its Function
/// and its scripts, on the single server and the cluster, pass the same suite.
struct Binary(Redis, bool);

impl Backend for Binary {
    type S = RedisStore;
    fn open(&self, clock: Clock) -> RedisStore {
        let s = self.0.store(Some(clock)).writing_binary_values();
        if self.1 {
            s.scripts_only()
        } else {
            s
        }
    }
}

mod single_binary {
    use super::conformance;
    crate::conformance_suite!(super::Binary(super::Redis::single(), false));
}

mod cluster_binary {
    use super::conformance;
    crate::conformance_suite!(super::Binary(super::Redis::cluster(), false));
}

mod single_binary_scripts {
    use super::conformance;
    crate::conformance_suite!(super::Binary(super::Redis::single(), true));
}

/// Runs `bucket.lua` with a driver appended, on the single server.
fn eval_bucket_lua(driver: &str, args: &[String]) -> Vec<i64> {
    let src = format!(
        "{}\n{driver}",
        include_str!("../src/storage/redis/lua/bucket.lua")
    );
    eval_lua(&src, args)
}

/// One case of the bucket.lua comparisons: what the core says of bucket `b` under `p` at `now`
/// (the refilled state, what is available, every wait, and the state a booking of `milli`
/// leaves: 13 numbers), and the 9 arguments `eval_bucket_cases` reads for it.
fn lua_case(
    p: &ratelimit::core::bucket::Policy,
    b: &ratelimit::core::bucket::Bucket,
    now: i64,
    milli: u64,
) -> ([i64; 13], [String; 9]) {
    let r = b.refill(p, now).bucket;
    let wait = r.book_wait(p, milli, now);
    let mut booked = r;
    booked.book(p, milli, wait, now);
    let want = [
        r.available(p, now) as i64,
        r.wait_for(p, milli.min(p.capacity()), now) as i64,
        r.wait_until_full(p, now) as i64,
        r.wait_for_next_token(p, now) as i64,
        r.full_at(p),
        r.tokens as i64,
        r.stamp,
        r.prev as i64,
        wait as i64,
        r.reserved(p, now) as i64,
        booked.tokens as i64,
        booked.stamp,
        booked.prev as i64,
    ];
    let args = [
        p.limit().to_string(),
        p.per_ms().to_string(),
        p.code_arg(),
        b.tokens.to_string(),
        b.stamp.to_string(),
        b.prev.to_string(),
        b.kind.code().to_string(),
        now.to_string(),
        milli.to_string(),
    ];
    (want, args)
}

/// bucket.lua's answers to the cases of `lua_case` (9 arguments each): 13 numbers each.
fn eval_bucket_cases(args: &[String]) -> Vec<i64> {
    eval_bucket_lua(
        "local out = {} \
         for i = 1, #ARGV, 9 do \
           local p = policy(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2]) \
           local b = bucket(tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), \
             tonumber(ARGV[i + 6])) \
           local now, milli = tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]) \
           local r = refill(p, b, now) \
           local wait = book_wait(p, r, milli, now) \
           local k = bucket(r.tokens, r.stamp, r.prev, r.kind) \
           book(p, k, milli, wait, now) \
           for _, x in ipairs({ available(p, r, now), wait_for(p, r, math.min(milli, p.cap), now), \
             wait_for(p, r, p.cap, now), wait_for_next_token(p, r, now), full_at(p, r), \
             r.tokens, r.stamp, r.prev, wait, reserved(p, r, now), k.tokens, k.stamp, \
             k.prev }) do out[#out + 1] = int(x) end \
         end return out",
        args,
    )
}

/// EVAL of `src` with no keys and `args`, on the single server.
fn eval_lua(src: &str, args: &[String]) -> Vec<i64> {
    let client = redis::Client::open(env("RL_REDIS_URL")).unwrap();
    let mut c = client.get_connection().unwrap();
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(src).arg(0);
    for a in args {
        cmd.arg(a);
    }
    cmd.query(&mut c).unwrap()
}

/// Runs `request.lua`'s judge on records given as its HMGET fields ('' for a missing one),
/// each case 9 arguments: b, l, t, n, e, the lease's expiry ('' for none), the call's bucket
/// and terms, now. Returns, per case, 0 fresh, 1 replay or 2 in progress, and the lease's end.
fn eval_request_judge(args: &[String]) -> Vec<i64> {
    let src = format!(
        "{}\n{}\n{}",
        include_str!("../src/storage/redis/lua/bucket.lua"),
        include_str!("../src/storage/redis/lua/request.lua"),
        "local function f(x) if x == '' then return false end return x end \
         local out = {} \
         for i = 1, #ARGV, 9 do \
           local r = { f(ARGV[i]), f(ARGV[i + 1]), f(ARGV[i + 2]), f(ARGV[i + 3]), f(ARGV[i + 4]) } \
           local j, ends = judge_request(r, tonumber(ARGV[i + 5]), ARGV[i + 6], ARGV[i + 7], \
             tonumber(ARGV[i + 8])) \
           local code = 0 \
           if j == 'replay' then code = 1 elseif j == 'progress' then code = 2 end \
           out[#out + 1] = code out[#out + 1] = ends or 0 \
         end return out"
    );
    eval_lua(&src, args)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The scripts' judge is the core's: the same answer for every record, lease and call
    /// (a record without terms, the format before them, is none).
    #[test]
    fn the_lua_judge_of_request_ids_is_the_cores(
        cases in proptest::collection::vec((
            (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
            (0u32..4, 0i64..100, 0i64..100, proptest::option::of(0i64..100)),
        ), 32)
    ) {
        use ratelimit::core::request::{judge, Judgement, Record, Terms};
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut args = Vec::new();
        let mut want = Vec::new();
        for ((has, old_format, same_bucket, same_terms), (n, e, now, lease)) in &cases {
            let (bucket, terms) = ([1u8; 16], Terms([2; 16]));
            let call_bucket = if *same_bucket { bucket } else { [3; 16] };
            let call_terms = if *same_terms { terms } else { Terms([4; 16]) };
            let fields: [String; 5] = if *has {
                [
                    hex(&bucket),
                    if lease.is_some() { "ab".into() } else { String::new() },
                    if *old_format { String::new() } else { hex(&terms.0) },
                    n.to_string(),
                    e.to_string(),
                ]
            } else {
                Default::default()
            };
            args.extend(fields);
            args.push(lease.map(|l| l.to_string()).unwrap_or_default());
            args.extend([hex(&call_bucket), hex(&call_terms.0), now.to_string()]);
            let record = Record { bucket, terms, replays_left: *n, expires: *e };
            let seen = (*has && !*old_format).then_some(&record);
            want.extend(match judge(seen, &call_bucket, &call_terms, *now, *lease) {
                Judgement::Fresh => [0, 0],
                Judgement::Replay => [1, 0],
                Judgement::InProgress { until } => [2, until],
            });
        }
        prop_assert_eq!(eval_request_judge(&args), want);
    }

    /// bucket.lua's policies are the core's at any scale (limit up to 10^12, per up to 10^12
    /// ms, any state, the clock before, inside and past the windows, a state of another policy
    /// converted): the refilled state, what is available, and every wait.
    #[test]
    fn lua_policies_are_the_cores_at_any_scale(
        cases in proptest::collection::vec((
            (0u8..4, 0u8..4, 1u64..=1_000_000_000_000, 1u64..=1_000_000_000_000),
            (0.0f64..=1.0, 0.0f64..=1.0, -1.0f64..3.0, 0.0f64..=1.0),
        ), 24)
    ) {
        use ratelimit::core::bucket::{Bucket, Kind, Policy};
        let t0 = 1_700_000_000_000i64;
        let mut args = Vec::new();
        let mut want = Vec::new();
        for ((kind, stored_kind, limit, per), (ft, fp, fnow, fcost)) in cases {
            // Small limits and periods as often as large ones.
            let limit = if limit % 2 == 0 { limit % 20 + 1 } else { limit };
            let per = if per % 2 == 0 { per % 5_000 + 1 } else { per };
            let kind = Kind::from_code(i64::from(kind)).unwrap();
            let stored_kind = Kind::from_code(i64::from(stored_kind)).unwrap();
            // A stepped bucket's amount: from 1 to the limit, or past it.
            let amount = if per % 3 == 0 { limit + 1 } else { (limit * 7 + per) % limit + 1 };
            let p = Policy::new(limit, per).unwrap().with_kind(kind).with_amount(amount).unwrap();
            let cap = p.capacity();
            // Whole fractions of the capacity as often as any value: they make the products
            // of the windows' waits divide exactly (the edge of Policy::latest_d).
            let share = |f: f64| match (f * 8.0) as u64 {
                0 => cap / 2,
                1 => cap / 4,
                _ => (cap as f64 * f) as u64,
            };
            let mut b = Bucket {
                tokens: share(ft),
                stamp: t0,
                prev: if stored_kind == Kind::SlidingWindow { share(fp) } else { 0 },
                kind: stored_kind,
            };
            // Booked ahead (see Bucket::book): a token bucket in debt, a window past its limit.
            if fp > 0.75 {
                match stored_kind {
                    Kind::TokenBucket => {
                        b.tokens = 0;
                        b.prev = (t0 - 5) as u64;
                        b.stamp = t0 + (per as f64 * 8.0 * (fp - 0.75)) as i64;
                    }
                    // What the booked step leaves over, from then on.
                    Kind::SteppedBucket => {
                        b.prev = (t0 - 5) as u64;
                        b.stamp = t0 + (per as f64 * 8.0 * (fp - 0.75)) as i64;
                    }
                    _ => b.tokens += cap,
                }
            }
            let now = t0 + (per as f64 * fnow) as i64;
            let milli = ((limit as f64 * fcost) as u64).clamp(1, limit) * 1_000;
            let (w, a) = lua_case(&p, &b, now, milli);
            want.extend(w);
            args.extend(a);
        }
        let got = eval_bucket_cases(&args);
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.chunks(13).zip(want.chunks(13)).enumerate() {
            prop_assert_eq!(g, w, "case {}: {:?}", i, &args[i * 9..i * 9 + 9]);
        }
    }

    /// The Lua muldiv is exact wherever the bucket arithmetic calls it: a <= c < 2^50, b < 2^50.
    #[test]
    fn lua_muldiv_is_exact_at_every_bound(
        cases in proptest::collection::vec((1u64..(1 << 50), 0u64..(1 << 50), 0.0f64..=1.0), 32)
    ) {
        let inputs: Vec<(u64, u64, u64)> = cases
            .iter()
            .map(|&(c, b, f)| (((c as f64) * f) as u64 % (c + 1), b, c))
            .collect();
        let args: Vec<String> = inputs
            .iter()
            .flat_map(|(a, b, c)| [a.to_string(), b.to_string(), c.to_string()])
            .collect();
        let got = eval_bucket_lua(
            "local out = {} \
             for i = 1, #ARGV, 3 do \
               local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])) \
               out[#out + 1] = int(q) out[#out + 1] = int(r) \
             end return out",
            &args,
        );
        for (i, (a, b, c)) in inputs.iter().enumerate() {
            let p = *a as u128 * *b as u128;
            let want = ((p / *c as u128) as i64, (p % *c as u128) as i64);
            prop_assert_eq!((got[2 * i], got[2 * i + 1]), want, "a={} b={} c={}", a, b, c);
        }
    }
}

/// A token bucket's debt deep enough that its milli-tokens pass 2^53 (forced charges of a
/// large limit, or a stepped debt converted: up to MAX_BOOKED ahead) is reported as the core
/// reports it: `reserved` (at most MAX_USED milli-tokens, as every debt) and what a window
/// converted from it counts. The scripts answered a rounded double, and -2^63 past i64.
#[test]
fn a_deep_token_bucket_debt_is_reported_as_the_core_reports_it() {
    use ratelimit::core::bucket::{Bucket, Kind, Policy, MAX_BOOKED};
    let t0 = 1_700_000_000_000i64;
    let mut args = Vec::new();
    let mut want = Vec::new();
    for (limit, per, ahead) in [
        (999_999_999_999u64, 1u64, 100i64),
        (999_999_999_999, 1, 1_000_000),
        (1_000_000_000_000, 1, MAX_BOOKED - t0),
        (999_999_999_999, 7, MAX_BOOKED - t0),
        (3, 1_000, 5_000),
    ] {
        let p = Policy::new(limit, per).unwrap();
        let b = Bucket {
            tokens: 0,
            stamp: t0 + ahead,
            prev: (t0 - 5) as u64,
            kind: Kind::TokenBucket,
        };
        let window = p.with_kind(Kind::FixedWindow);
        want.extend([
            b.reserved(&p, t0) as i64,
            b.refill(&window, t0).bucket.tokens as i64,
        ]);
        args.extend([
            limit.to_string(),
            per.to_string(),
            b.stamp.to_string(),
            b.prev.to_string(),
            t0.to_string(),
        ]);
    }
    let got = eval_bucket_lua(
        "local out = {} \
         for i = 1, #ARGV, 5 do \
           local p = policy(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), '0') \
           local w = policy(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), '1') \
           local b = bucket(0, tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), 0) \
           local now = tonumber(ARGV[i + 4]) \
           out[#out + 1] = int(reserved(p, b, now)) \
           out[#out + 1] = int(refill(w, b, now).tokens) \
         end return out",
        &args,
    );
    assert_eq!(got, want);
    // Past MAX_USED: the cap, rounded up to whole tokens.
    assert_eq!(want[4], 1_125_899_906_843);
}

#[test]
fn lua_muldiv_is_exact_at_the_extremes() {
    let max = (1u64 << 50) - 1;
    let cases = [
        (max, max, max),
        (max - 1, max, max),
        (1, max, max),
        (0, max, 7),
        (999_999_999_999, 1_000_000_000_000_000, 1_000_000_000_000),
        (
            1_000_000_000_000_000,
            1_000_000_000_000,
            1_000_000_000_000_000,
        ),
        (
            999_999_999_999_999,
            1_000_000_000_000,
            1_000_000_000_000_000,
        ),
        (3, 1, 1_000_000_000_000_000),
    ];
    let args: Vec<String> = cases
        .iter()
        .flat_map(|(a, b, c)| [a.to_string(), b.to_string(), c.to_string()])
        .collect();
    let got = eval_bucket_lua(
        "local out = {} for i = 1, #ARGV, 3 do \
           local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])) \
           out[#out + 1] = q out[#out + 1] = r end return out",
        &args,
    );
    for (i, (a, b, c)) in cases.iter().enumerate() {
        let p = *a as u128 * *b as u128;
        assert_eq!(
            (got[2 * i], got[2 * i + 1]),
            ((p / *c as u128) as i64, (p % *c as u128) as i64),
            "a={a} b={b} c={c}"
        );
    }
}

#[test]
fn decisions_use_the_servers_clock_without_a_host_clock() {
    let r = Redis::single();
    let mut s = r.store(None);
    let a = ask(2, 60_000, 0);
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert!(v.allowed);
    assert_eq!(v.remaining, 1);
    // The server's time, not the manual clock's: a bucket stamped now, near the wall clock.
    let client = redis::Client::open(r.url.clone()).unwrap();
    let mut c = client.get_connection().unwrap();
    let stored: String = redis::cmd("GET")
        .arg(format!(
            "{}{{{}}}b:{}",
            r.prefix,
            "fe".repeat(16),
            "01".repeat(16)
        ))
        .query(&mut c)
        .unwrap();
    let stamp: i64 = stored.split(' ').nth(1).unwrap().parse().unwrap();
    let wall = (system_clock())();
    assert!((stamp - wall).abs() < 5_000, "stamp {stamp} vs wall {wall}");
}

#[test]
fn every_key_of_a_subject_carries_its_group_as_hash_tag() {
    let r = Redis::single();
    let clock = ManualClock::at(T0);
    let mut s = r.store(Some(clock.clock()));
    s.acquire(&key(1), &ask(5, 1_000, 1), 60_000, &mut none())
        .unwrap();
    let client = redis::Client::open(r.url.clone()).unwrap();
    let mut c = client.get_connection().unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", r.prefix))
        .query(&mut c)
        .unwrap();
    keys.retain(|k| k.contains('{'));
    keys.sort();
    let tag = format!("{{{}}}", "fe".repeat(16));
    let b = "01".repeat(16);
    assert_eq!(
        keys,
        [
            format!("{}{tag}b:{b}", r.prefix),
            format!("{}{tag}l:{b}", r.prefix),
        ]
    );
}

#[test]
fn an_unreachable_server_is_an_error_within_the_timeout() {
    let settings = RedisSettings {
        target: Target::parse("redis://127.0.0.1:1/0", &[]).unwrap(),
        prefix: "rl:".into(),
        timeout_ms: 50,
        flush_ms: 1_000,
    };
    let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    let t0 = std::time::Instant::now();
    let e = s
        .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
        .unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert_eq!(e.kind(), ErrorKind::Unreachable);
    assert!(t0.elapsed().as_millis() < 500);
}

/// A store on the single server's address with `url` changed by `edit`.
fn store_at(edit: impl Fn(&str) -> String) -> RedisStore {
    let settings = RedisSettings {
        target: Target::parse(&edit(&env("RL_REDIS_URL")), &[]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 2_000,
        flush_ms: 0,
    };
    RedisStore::new(settings, None, system_clock(), OpsLog::none())
}

#[test]
fn a_database_the_server_does_not_have_is_a_misconfiguration_not_an_outage() {
    let mut s = store_at(|u| format!("{}/9999", u.trim_end_matches("/0")));
    for _ in 0..3 {
        let e = s
            .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    }
}

#[test]
fn a_user_without_the_permission_to_run_scripts_is_a_misconfiguration() {
    let user = format!("rl-noperm-{}", std::process::id());
    let mut admin = redis::Client::open(env("RL_REDIS_URL"))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            &user,
            "on",
            ">pw",
            "~*",
            "+@all",
            "-evalsha",
            "-eval",
            "-fcall",
            "-function",
        ])
        .query(&mut admin)
        .unwrap();
    let mut s = store_at(|u| u.replacen("redis://", &format!("redis://{user}:pw@"), 1));
    let e = s
        .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
        .unwrap_err();
    let _: () = redis::cmd("ACL")
        .arg(&["DELUSER", &user])
        .query(&mut admin)
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    assert!(!e.to_string().contains("pw@"), "no password: {e}");
}

fn admin() -> redis::Connection {
    redis::Client::open(env("RL_REDIS_URL"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn record(fp: u8) -> KeyRecord {
    KeyRecord {
        fingerprint: [fp; 16],
        path: "/k".into(),
        host: "h".into(),
        previous: None,
        since_ms: STAMP_NOW,
    }
}

#[test]
fn a_key_record_is_stamped_with_the_servers_time() {
    let r = Redis::single();
    let mut s = r.store(None);
    assert!(s.record_key(&record(1), None).unwrap());
    let since = s.key_record().unwrap().unwrap().since_ms;
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut admin()).unwrap();
    let server_now = secs * 1_000 + micros / 1_000;
    assert!(
        (0..5_000).contains(&(server_now - since)),
        "{since} vs {server_now}"
    );
}

#[test]
fn a_damaged_key_record_is_none_recorded_and_never_a_failed_call() {
    let r = Redis::single();
    let mut s = r.store(None);
    let key = format!("{}keyring", r.prefix);
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(&["f", "zz", "s", "abc", "p", "\u{1b}[31mforged"])
        .query(&mut admin())
        .unwrap();
    assert_eq!(s.key_record().unwrap(), None);
    assert!(s.record_key(&record(2), None).unwrap(), "recorded over it");
    assert_eq!(s.key_record().unwrap().unwrap().fingerprint, [2; 16]);
    // A valid fingerprint with a damaged time: recorded, its time unknown (0).
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(&["s", "12345678901234567890123"])
        .query(&mut admin())
        .unwrap();
    assert_eq!(s.key_record().unwrap().unwrap().since_ms, 0);
}

/// A store of keys under `prefix` on `server` (another connection to the same buckets).
fn store_on(server: &OwnServer, prefix: &str) -> RedisStore {
    let settings = RedisSettings {
        target: Target::parse(&server.url, &[]).unwrap(),
        prefix: prefix.to_string(),
        timeout_ms: 2_000,
        flush_ms: 0,
    };
    RedisStore::new(settings, None, system_clock(), OpsLog::none())
}

#[test]
fn a_server_that_evicts_keys_is_refused_unless_the_operator_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &["--maxmemory-policy", "volatile-lru"]);
    let mut s = store_on(&server, &fresh_prefix());
    let e = s
        .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    assert!(
        e.to_string().contains("maxmemory-policy is volatile-lru"),
        "{e}"
    );
    let mut accepting = store_on(&server, &fresh_prefix()).allowing_eviction();
    assert!(
        accepting
            .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    // Set right at run time: the next connection finds it.
    let mut admin = server.admin();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory-policy", "noeviction"])
        .query(&mut admin)
        .unwrap();
    assert!(
        s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
}

/// A listener that accepts connections and never answers: to a client, a SIGSTOPped Redis (the
/// kernel still completes the handshake).
fn silent_server() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}", l.local_addr().unwrap().port());
    (l, url)
}

#[test]
fn a_silent_first_seed_of_a_cluster_leaves_time_to_ask_the_next() {
    let (_silent, url) = silent_server();
    let mut seeds = vec![url];
    seeds.extend(env("RL_REDIS_CLUSTER").split(',').map(str::to_string));
    let settings = RedisSettings {
        target: Target::parse("", &seeds).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 1_000,
        flush_ms: 1_000,
    };
    let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    let t0 = std::time::Instant::now();
    let a = s
        .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
        .unwrap();
    let took = t0.elapsed();
    assert!(a.verdict.allowed, "{a:?}");
    // Half the budget on the silent seed, then the next answers.
    assert!(
        took.as_millis() >= 500 && took.as_millis() < 1_000,
        "{took:?}"
    );
}

#[test]
fn a_silent_cluster_costs_each_call_at_most_its_budget() {
    // The only seed is silent: the slots are never read.
    let (_silent, url) = silent_server();
    let settings = RedisSettings {
        target: Target::parse("", &[url]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 200,
        flush_ms: 1_000,
    };
    let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let e = s
            .acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
            .unwrap_err();
        let took = t0.elapsed();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert!(
            took.as_millis() >= 200 && took.as_millis() < 600,
            "{took:?}"
        );
    }
}

#[test]
fn counts_are_batched_and_none_is_lost() {
    let r = Redis::single();
    let clock = ManualClock::at(T0);
    let batched = || {
        let settings = RedisSettings {
            target: Target::parse(&r.url, &[]).unwrap(),
            prefix: r.prefix.clone(),
            timeout_ms: 2_000,
            flush_ms: 1_000,
        };
        RedisStore::new(settings, None, clock.clock(), OpsLog::none())
    };
    let mut s = batched();
    let a = ask(1, 3_600_000, 0);
    for _ in 0..3 {
        s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    }
    let seen = |n: &mut RedisStore| {
        let c = n.stats().unwrap().counters;
        (c.allowed, c.denied_rate)
    };
    let mut other = batched();
    assert_eq!(seen(&mut other), (0, 0), "held back for up to a second");
    assert_eq!(seen(&mut s), (1, 2), "a process sees its own at once");
    clock.set(T0 + 1_000);
    s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    assert_eq!(seen(&mut other), (1, 3), "added once a second");
    s.acquire(&key(1), &a, 60_000, &mut none()).unwrap();
    drop(s);
    assert_eq!(seen(&mut other), (1, 4), "and at the end");
}

/// A value at a bucket's key that ratelimit did not write is a damaged store: a denial
/// ("unavailable", never read as a full bucket), after which the bucket is an empty one that
/// refills as the policy allows.
#[test]
fn a_damaged_bucket_is_a_denial_then_refills_from_empty() {
    let r = Redis::single();
    let clock = ManualClock::at(T0);
    let mut s = r.store(Some(clock.clock()));
    let client = redis::Client::open(r.url.clone()).unwrap();
    let mut c = client.get_connection().unwrap();
    let bucket = format!("{}{{{}}}b:{}", r.prefix, "fe".repeat(16), "01".repeat(16));
    let _: () = redis::cmd("SET")
        .arg(&bucket)
        .arg("not a bucket")
        .query(&mut c)
        .unwrap();
    let a = ask(5, 1_000, 0);
    let e = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.kind().is_storage_fault());
    let v = s.peek(&key(1), &a.policy, &mut none()).unwrap();
    assert_eq!((v.allowed, v.remaining), (false, 0), "empty, not full");
    clock.set(T0 + 200);
    let v = s.acquire(&key(1), &a, 60_000, &mut none()).unwrap().verdict;
    assert!(v.allowed, "one token earned in 200 ms");
    assert!(
        !s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
}

/// A server that refuses `TIME` in scripts (a managed service renaming it away, as
/// `rename-command TIME ""` does: "Unknown Redis command called from script", which names no
/// command): detected by asking it once, then decided with the host's clock, exactly.
#[test]
fn a_server_without_time_in_scripts_is_decided_with_the_hosts_clock() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &["--rename-command", "TIME", ""]);
    let prefix = fresh_prefix();
    let mut s = store_on(&server, &prefix);
    let admitted = (0..8)
        .filter(|_| {
            s.acquire(&key(1), &ask(5, 60_000, 0), 60_000, &mut none())
                .unwrap()
                .verdict
                .allowed
        })
        .count();
    assert_eq!(admitted, 5);
    let mut other = store_on(&server, &prefix);
    let d = other
        .acquire(&key(1), &ask(5, 60_000, 0), 60_000, &mut none())
        .unwrap();
    assert!(!d.verdict.allowed, "one bucket for both connections");
}

// ---- The Function (issue 24) ----

/// How many of `calls` plain calls of a bucket of 5 a minute `s` admits.
fn admitted(s: &mut RedisStore, calls: usize) -> usize {
    (0..calls)
        .filter(|_| {
            s.acquire(&key(1), &ask(5, 60_000, 0), 60_000, &mut none())
                .unwrap()
                .verdict
                .allowed
        })
        .count()
}

/// Calls of the server's `command` so far (INFO commandstats), 0 before the first.
fn calls_of(server: &OwnServer, command: &str) -> u64 {
    let mut c = server.admin();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    let line = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn a_plain_acquire_goes_by_the_function_and_one_with_a_slot_by_the_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &[]);
    // Counts added once a minute: no script of theirs among the calls counted here.
    let settings = RedisSettings {
        target: Target::parse(&server.url, &[]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 2_000,
        flush_ms: 60_000,
    };
    let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    assert_eq!(admitted(&mut s, 4), 4);
    // The first decision of a connection asks for the module and goes by the scripts; the
    // next ones by the Function (one more call for the first of them, which found no library).
    let (fcalls, evalshas) = (calls_of(&server, "fcall"), calls_of(&server, "evalsha"));
    assert!((3..=4).contains(&fcalls), "{fcalls}");
    assert_eq!(calls_of(&server, "function|load"), 1);
    // EVALSHA, NOSCRIPT, the script loaded, EVALSHA again: the first decision's.
    assert!((1..=2).contains(&evalshas), "{evalshas}");
    s.acquire(&key(2), &ask(5, 60_000, 1), 60_000, &mut none())
        .unwrap();
    assert_eq!(calls_of(&server, "fcall"), fcalls);
    assert_eq!(
        calls_of(&server, "evalsha"),
        evalshas + 1,
        "a slot: the scripts"
    );
}

/// The library gone (`FUNCTION FLUSH`, or a restart without persistence) is loaded again by
/// the next call, which decides: nothing is reset and nothing fails.
#[test]
fn the_function_is_loaded_again_after_a_flush_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &[]);
    let mut s = store_on(&server, &fresh_prefix());
    assert_eq!(admitted(&mut s, 3), 3);
    let mut c = server.admin();
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
    assert_eq!(admitted(&mut s, 4), 2, "the same bucket: 2 of 5 left");
    drop(server);
    let server = OwnServer::start(dir.path(), &[]);
    // The connection was to the stopped server: the first call may find it gone (a transient
    // error), the next one connects to the new server.
    let first = s.acquire(&key(1), &ask(5, 60_000, 0), 60_000, &mut none());
    assert!(first
        .as_ref()
        .map_or_else(|e| e.is_transient(), |r| r.verdict.allowed));
    let more = admitted(&mut s, 5);
    assert_eq!(
        more + usize::from(first.is_ok()),
        5,
        "a new server: a full bucket"
    );
    assert!(calls_of(&server, "fcall") > 0);
}

/// Loads a library named `name` holding one function (an older build's, as the server sees it).
fn load_library(c: &mut redis::Connection, name: &str) {
    let code =
        format!("#!lua name={name}\nredis.register_function('f_{name}', function() return 1 end)");
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(code)
        .query(c)
        .unwrap();
}

/// The libraries on the server, sorted.
fn libraries(c: &mut redis::Connection) -> Vec<String> {
    let list: Vec<Vec<redis::Value>> = redis::cmd("FUNCTION").arg("LIST").query(c).unwrap();
    let mut names: Vec<String> = list
        .iter()
        .map(|kv| {
            let i = kv
                .iter()
                .position(|v| {
                    redis::from_redis_value::<String>(v.clone()).ok().as_deref()
                        == Some("library_name")
                })
                .unwrap();
            redis::from_redis_value(kv[i + 1].clone()).unwrap()
        })
        .collect();
    names.sort();
    names
}

/// Five other libraries stay beside this build's (a rolling upgrade while an older build still
/// runs, each with hosts of both value forms, never makes builds delete each other's); a sixth
/// makes the load delete them all. Libraries that are not a build's (another name, even one
/// starting `ratelimit_`) are never touched.
#[test]
fn other_builds_libraries_are_deleted_past_five() {
    let old = |i: u32| format!("ratelimit_{i:016x}");
    let foreign = ["app_lib", "ratelimit_mine"];
    for (olds, left) in [(5, 5), (6, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let server = OwnServer::start(dir.path(), &[]);
        let mut c = server.admin();
        for name in (1..=olds).map(old).chain(foreign.map(String::from)) {
            load_library(&mut c, &name);
        }
        let mut s = store_on(&server, &fresh_prefix());
        assert_eq!(admitted(&mut s, 3), 3);
        assert_eq!(calls_of(&server, "function|load"), olds as u64 + 3);
        let libs = libraries(&mut c);
        let builds: Vec<&String> = libs.iter().filter(|n| n.len() == 26).collect();
        assert_eq!(builds.len(), left + 1, "{libs:?}");
        assert!(
            foreign.iter().all(|f| libs.iter().any(|n| n == f)),
            "{libs:?}"
        );
    }
}

/// Hosts of one build with `ratelimit.redis_value_form` set both ways each load their own
/// library beside four older ones, and never delete each other's: each loads once.
#[test]
fn text_and_binary_hosts_keep_each_others_library() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &[]);
    let mut c = server.admin();
    for i in 1..=4u32 {
        load_library(&mut c, &format!("ratelimit_{i:016x}"));
    }
    let mut text = store_on(&server, &fresh_prefix());
    let mut binary = store_on(&server, &fresh_prefix()).writing_binary_values();
    // Taking turns (limit 5: each admits 4 of 4).
    for _ in 0..2 {
        assert_eq!(admitted(&mut text, 2), 2);
        assert_eq!(admitted(&mut binary, 2), 2);
    }
    assert_eq!(calls_of(&server, "function|load"), 4 + 2);
    assert_eq!(libraries(&mut c).len(), 6);
}

/// A build still running whose library was deleted by another's load loads it again on its
/// next call, which decides as before: the bucket is the same.
#[test]
fn a_build_whose_library_was_deleted_loads_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::start(dir.path(), &[]);
    let mut c = server.admin();
    let mut s = store_on(&server, &fresh_prefix());
    assert_eq!(admitted(&mut s, 3), 3);
    let ours = libraries(&mut c);
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(&ours[0])
        .query(&mut c)
        .unwrap();
    assert_eq!(admitted(&mut s, 4), 2, "the same bucket: 2 of 5 left");
    assert_eq!(libraries(&mut c), ours);
}

/// A user who may call Functions but not load them (`-function`), or may not call them:
/// decided by the scripts, exactly.
#[test]
fn a_user_without_functions_is_decided_by_the_scripts() {
    for refused in ["-function", "-fcall"] {
        let dir = tempfile::tempdir().unwrap();
        let server = OwnServer::start(dir.path(), &[]);
        let mut c = server.admin();
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "u", "on", ">pw", "~*", "+@all", refused])
            .query(&mut c)
            .unwrap();
        let settings = RedisSettings {
            target: Target::parse(&format!("{}?user=u&pass=pw", server.url), &[]).unwrap(),
            prefix: fresh_prefix(),
            timeout_ms: 2_000,
            flush_ms: 0,
        };
        let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
        assert_eq!(admitted(&mut s, 8), 5, "{refused}");
        assert!(calls_of(&server, "evalsha") >= 8, "{refused}");
    }
}

// ---- Damaged values of any type (issue 22) ----

/// Writes a value of `kind` at `name` (replacing what is there).
fn plant(c: &mut redis::Connection, name: &str, kind: &str) {
    let _: () = redis::cmd("DEL").arg(name).query(c).unwrap();
    let mut cmd = match kind {
        "hash" => redis::cmd("HSET"),
        "list" => redis::cmd("RPUSH"),
        "set" => redis::cmd("SADD"),
        "zset" => redis::cmd("ZADD"),
        _ => redis::cmd("SET"),
    };
    cmd.arg(name);
    match kind {
        "hash" => cmd.arg("f").arg("v"),
        "zset" => cmd.arg(1).arg("m"),
        "string" => cmd.arg("not a bucket"),
        _ => cmd.arg("v"),
    };
    let _: () = cmd.query(c).unwrap();
}

/// A value of any type at a bucket's name (another tenant of a shared Redis) is damaged: one
/// call fails as Corrupt (a storage fault: "unavailable", never Timeout or Unreachable, which
/// are a node's faults), then the bucket is an empty one and decisions go on.
#[test]
fn a_value_of_any_type_at_a_bucket_is_damaged_once_then_replaced() {
    let r = Redis::single();
    let mut c = admin();
    let mut s = r.store(None);
    let a = ask(5, 86_400_000, 0);
    for (n, kind) in ["hash", "list", "set", "zset", "string"]
        .into_iter()
        .enumerate()
    {
        let k = key(40 + n as u8);
        let bucket = format!("{}{{{}}}b:{}", r.prefix, hex(&k.group), hex(&k.bucket));
        plant(&mut c, &bucket, kind);
        let e = s.acquire(&k, &a, 60_000, &mut none()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{kind}: {e}");
        let t: String = redis::cmd("TYPE").arg(&bucket).query(&mut c).unwrap();
        assert_eq!(t, "string", "{kind}: replaced");
        let v = s.acquire(&k, &a, 60_000, &mut none()).unwrap().verdict;
        assert!(!v.allowed, "{kind}: an empty bucket, never a full one");
        assert_eq!(
            s.peek(&k, &a.policy, &mut none()).unwrap().remaining,
            0,
            "{kind}"
        );
    }
}

/// The same at the name of a bucket's leases and of a request id's record: deleted, the call
/// Corrupt, the next one decided.
#[test]
fn a_value_of_another_type_at_leases_or_a_request_record_is_damaged_once() {
    let r = Redis::single();
    let mut c = admin();
    let mut s = r.store(None);
    let k = key(50);
    let tag = format!("{}{{{}}}", r.prefix, hex(&k.group));
    let leases = format!("{tag}l:{}", hex(&k.bucket));
    plant(&mut c, &leases, "string");
    let a = ask(5, 86_400_000, 2);
    let e = s.acquire(&k, &a, 60_000, &mut none()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    let got = s.acquire(&k, &a, 60_000, &mut none()).unwrap();
    assert!(got.verdict.allowed && got.lease.is_some());
    plant(&mut c, &leases, "hash");
    let lease = got.lease.unwrap();
    assert_eq!(
        s.release(&[lease], &mut none()).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    let k = key(51);
    let request = format!("{}{{{}}}q:{}", r.prefix, hex(&k.group), hex(&[7; 16]));
    plant(&mut c, &request, "list");
    let with = conformance::with_request(ask(5, 86_400_000, 0), 7, 60_000);
    let e = s.acquire(&k, &with, 60_000, &mut none()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(
        s.acquire(&k, &with, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
}

/// The operator's reads and the key record pass over foreign values: stats, top and the
/// record answer, the counters replaced when they are not a hash.
#[test]
fn foreign_values_never_make_stats_top_or_the_key_record_fail() {
    let r = Redis::single();
    let mut c = admin();
    let mut s = r.store(None);
    let k = key(60);
    assert!(
        s.acquire(&k, &ask(1, 86_400_000, 0), 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    assert!(
        !s.acquire(&k, &ask(1, 86_400_000, 0), 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    let tag = format!("{}{{{}}}", r.prefix, hex(&[0x99; 16]));
    plant(&mut c, &format!("{tag}b:{}", hex(&[1; 16])), "hash");
    plant(&mut c, &format!("{tag}l:{}", hex(&[1; 16])), "string");
    plant(&mut c, &format!("{}counters", r.prefix), "list");
    plant(&mut c, &format!("{}keyring", r.prefix), "set");
    // A decision adds its counts (flush_ms 0): over the list, replaced by the counters.
    assert!(
        !s.acquire(&k, &ask(1, 86_400_000, 0), 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    let t: String = redis::cmd("TYPE")
        .arg(format!("{}counters", r.prefix))
        .query(&mut c)
        .unwrap();
    assert_eq!(t, "hash");
    let stats = s.stats().unwrap();
    assert_eq!(
        stats.counters.denied_rate, 1,
        "counted again from the replacement"
    );
    assert_eq!(
        stats.entries, 2,
        "the bucket and the foreign value, by name"
    );
    let top = s.top(10).unwrap();
    assert_eq!(top.len(), 1, "only the bucket ratelimit wrote");
    assert_eq!(s.key_record().unwrap(), None);
    assert!(s.record_key(&record(9), None).unwrap(), "recorded over it");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A host writing new buckets in binary (`ratelimit.redis_value_form = binary`) makes them
/// binary on the scripts' path and the Function's, a compound call's too; a bucket it finds in
/// text stays text, and a damaged one is replaced in text.
#[test]
fn a_host_writing_binary_values_makes_new_buckets_binary_and_keeps_found_ones_as_found() {
    let r = Redis::single();
    let mut c = admin();
    let name = |k: &ratelimit::core::subject::BucketKey| {
        format!("{}{{{}}}b:{}", r.prefix, hex(&k.group), hex(&k.bucket))
    };
    let get = |c: &mut redis::Connection, k: &ratelimit::core::subject::BucketKey| -> Vec<u8> {
        redis::cmd("GET").arg(name(k)).query(c).unwrap()
    };
    let scripts = || r.store(None).scripts_only().writing_binary_values();
    let function = || r.store(None).writing_binary_values();
    let a = ask(5, 60_000, 0);
    let (k71, k72, k73) = (key(71), key(72), key(73));
    // A compound call's buckets are one subject's.
    let k74 = ratelimit::core::subject::BucketKey {
        bucket: [74; 16],
        ..k73
    };
    let mut s = scripts();
    s.acquire(&k71, &a, 60_000, &mut none()).unwrap();
    let mut f = function();
    assert!(f.uses_functions().unwrap());
    f.acquire(&k72, &a, 60_000, &mut none()).unwrap();
    s.acquire_all(&[k73, k74], &[a, a], 60_000, &mut none())
        .unwrap();
    for k in [k71, k72, k73, k74] {
        let v = get(&mut c, &k);
        assert_eq!((v.len(), v[0]), (57, 1), "bucket {:?}: {v:?}", k.bucket[0]);
    }
    // Found in text: kept so by both paths.
    let mut t = r.store(None);
    t.acquire(&key(75), &a, 60_000, &mut none()).unwrap();
    s.acquire(&key(75), &a, 60_000, &mut none()).unwrap();
    f.acquire(&key(75), &a, 60_000, &mut none()).unwrap();
    let v = String::from_utf8(get(&mut c, &key(75))).unwrap();
    assert_eq!(v.split(' ').nth(4), Some("3"), "{v}");
    // Damaged: replaced in text, which every build reads.
    let _: () = redis::cmd("SET")
        .arg(name(&key(76)))
        .arg("garbage")
        .query(&mut c)
        .unwrap();
    let e = f.acquire(&key(76), &a, 60_000, &mut none()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(get(&mut c, &key(76)).starts_with(b"0 "));
}

/// A bucket in binary (the form a later build writes: bucket.lua's `format_bucket`) is shown
/// by top with its counts, and denials added from a deny cache keep it binary.
#[test]
fn a_binary_bucket_is_in_top_with_its_counts_and_stays_binary_when_denials_are_added() {
    let r = Redis::single();
    let mut c = admin();
    let mut s = r.store(None);
    let k = key(61);
    for allowed in [true, false] {
        let v = s.acquire(&k, &ask(1, 86_400_000, 0), 60_000, &mut none());
        assert_eq!(v.unwrap().verdict.allowed, allowed);
    }
    let name = format!("{}{{{}}}b:{}", r.prefix, hex(&k.group), hex(&k.bucket));
    let text: String = redis::cmd("GET").arg(&name).query(&mut c).unwrap();
    let fields: Vec<i64> = text.split(' ').map(|f| f.parse().unwrap()).collect();
    assert_eq!(fields[4..], [1, 1, 0], "{text}");
    let binary = |fields: &[i64]| {
        let mut v = vec![1u8];
        v.extend(fields.iter().flat_map(|f| f.to_le_bytes()));
        v
    };
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg(binary(&fields))
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    let top = s.top(10).unwrap();
    assert_eq!(top.len(), 1);
    assert_eq!(
        (top[0].bucket, top[0].allowed, top[0].denied_rate),
        (k.bucket, 1, 1)
    );
    assert_eq!(top[0].tokens_milli, fields[0] as u64);
    s.add_denials(&[(k, 5)]).unwrap();
    let after: Vec<u8> = redis::cmd("GET").arg(&name).query(&mut c).unwrap();
    let mut expected = fields.clone();
    expected[5] += 5;
    assert_eq!(after, binary(&expected));
}

/// A server that refused Functions, restarted with them allowed (an upgrade to 7.x, an ACL
/// changed): the Function is tried again after the reconnect, as function.rs says.
#[test]
fn functions_refused_are_tried_again_after_a_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let user = |server: &OwnServer, refused: &str| {
        let mut c = server.admin();
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "u", "on", ">pw", "~*", "+@all", refused])
            .query(&mut c)
            .unwrap();
    };
    let server = OwnServer::start(dir.path(), &[]);
    user(&server, "-fcall");
    let settings = RedisSettings {
        target: Target::parse(&format!("{}?user=u&pass=pw", server.url), &[]).unwrap(),
        prefix: fresh_prefix(),
        timeout_ms: 2_000,
        flush_ms: 0,
    };
    let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
    assert_eq!(admitted(&mut s, 3), 3);
    drop(server);
    let server = OwnServer::start(dir.path(), &[]);
    user(&server, "+fcall");
    // The first call may find the stopped server's connection gone (a transient error).
    let first = s.acquire(&key(1), &ask(5, 60_000, 0), 60_000, &mut none());
    assert!(first.map_or_else(|e| e.is_transient(), |_| true));
    admitted(&mut s, 3);
    assert!(calls_of(&server, "fcall") > 0, "still by the scripts");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// bucket.lua's stepped bucket is the core's at the extremes: amounts up to 10^12 (past
    /// the limit), stamps and clocks anywhere up to MAX_BOOKED and a step or two around it, a
    /// debt's decision before or after the clock, costs past the limit (a forced charge), a
    /// state of any policy converted. (Held when first run with 2,000 cases.)
    #[test]
    fn lua_stepped_buckets_are_the_cores_at_the_extremes(
        cases in proptest::collection::vec((
            (0u8..4, 1u64..=1_000_000_000_000, 1u64..=1_000_000_000_000, 1u64..=1_000_000_000_000),
            (0.0f64..=1.0, 0u8..4, 0.0f64..=1.0, 0.0f64..=1.0, 0u8..3),
        ), 24)
    ) {
        use ratelimit::core::bucket::{Bucket, Kind, Policy, MAX_BOOKED};
        let t0 = 1_700_000_000_000i64;
        let mut args = Vec::new();
        let mut want = Vec::new();
        for ((stored_kind, limit, per, amount), (ft, prevsel, fstamp, fnow, nowsel)) in cases {
            let limit = if limit % 3 == 0 { limit % 20 + 1 } else { limit };
            let per = if per % 3 == 0 { per % 5_000 + 1 } else { per };
            let amount = if amount % 3 == 0 { amount % 20 + 1 } else { amount };
            let kind = Kind::SteppedBucket;
            let stored_kind = Kind::from_code(i64::from(stored_kind)).unwrap();
            let p = Policy::new(limit, per).unwrap().with_kind(kind).with_amount(amount).unwrap();
            let cap = p.capacity();
            let span = (MAX_BOOKED - t0) as f64;
            let stamp = t0 + (span * fstamp * fstamp * fstamp) as i64;
            let now = match nowsel {
                0 => stamp + (span * fnow * fnow * fnow) as i64 - (span * 0.000001) as i64,
                1 => stamp + ((per as f64) * 3.0 * fnow) as i64,
                _ => stamp - ((per as f64) * 2.0 * fnow) as i64,
            }.min(MAX_BOOKED + 10);
            let prev: u64 = match prevsel {
                0 => 0,
                1 => (now - 3).max(1) as u64,
                2 => (now + 3) as u64,
                _ => t0 as u64,
            };
            let b = Bucket {
                tokens: (cap as f64 * ft) as u64,
                stamp,
                prev: if stored_kind == Kind::TokenBucket || stored_kind == Kind::SteppedBucket { prev } else { (cap as f64 * ft) as u64 / 2 },
                kind: stored_kind,
            };
            let milli = match nowsel { 0 => limit.min(3), 1 => (limit * 3).min(1_000_000_000_000), _ => limit } * 1_000;
            let (w, a) = lua_case(&p, &b, now, milli);
            want.extend(w);
            args.extend(a);
        }
        let got = eval_bucket_cases(&args);
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.chunks(13).zip(want.chunks(13)).enumerate() {
            prop_assert_eq!(g, w, "case {}: {:?}", i, &args[i * 9..i * 9 + 9]);
        }
    }
}

/// Text values every decision path calls damaged (bucket.lua's `parse_bucket`: `%d+` takes no
/// sign, the code is one of `[0123]`; the module's `parse` alike) are skipped by top too (red
/// team 3: its parser took Rust's `i64::from_str`, which reads a leading `+`, `-0` for an
/// unsigned field and `01` for the code).
#[test]
fn top_skips_the_text_values_every_decision_path_calls_damaged() {
    let r = Redis::single();
    let mut c = admin();
    let mut s = r.store(None);
    let values = [
        "+5000 1 1 1 1 1 0",
        "-0 1 1 1 1 1 0",
        "5000 1 1 1 +1 1 0",
        "5000 1 1 1 1 -0 1",
        "5000 1 1 1 1 1 0 01 5",
        "5000 1 1 1 1 1 0 1 +5",
    ];
    for (n, v) in values.iter().enumerate() {
        let k = key(200 + n as u8);
        let name = format!("{}{{{}}}b:{}", r.prefix, hex(&k.group), hex(&k.bucket));
        let _: () = redis::cmd("SET").arg(&name).arg(*v).query(&mut c).unwrap();
    }
    let listed: Vec<u8> = s.top(100).unwrap().iter().map(|b| b.bucket[0]).collect();
    // Each is damaged for a decision: the call fails RLCORRUPT and the value is replaced.
    for (n, v) in values.iter().enumerate() {
        let k = key(200 + n as u8);
        let e = s
            .acquire(&k, &ask(5, 60_000, 0), 60_000, &mut none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{v:?}");
    }
    assert!(
        listed.is_empty(),
        "top lists damaged values: {:?}",
        listed
            .iter()
            .map(|b| values[(*b - 200) as usize])
            .collect::<Vec<_>>()
    );
}
