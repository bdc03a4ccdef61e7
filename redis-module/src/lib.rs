//! ratelimit's decisions as native Redis commands (`redis-server --loadmodule
//! libratelimit_redis.so`), for servers that may load modules: one decision costs a GET and a SET
//! of the bucket instead of a Lua script (see issue 24 and `bench/redis`).
//!
//! The arithmetic is `ratelimit::core`'s own (`decision::decide`, `compound::decide_all`,
//! `request::judge`), never re-expressed here. Everything else is the Lua scripts' of
//! `src/storage/redis/lua/`, step for step: the same keys, the same stored values (the bucket's
//! text, the leases' sorted set, the request record's hash), the same expiries, the same replies
//! and the same clock (the server's, as `TIME` reads it), so that hosts with and without the
//! module, and a rolling upgrade, share every bucket exactly.
//!
//! Each command takes what `EVALSHA` of its script takes after the SHA: `numkeys`, the keys,
//! then the arguments, the first being `now` ('' = the server's clock). Its keys are declared
//! (`getkeys-api`), so that a Cluster routes and checks them like any command's.
//!
//! | command | script |
//! | --- | --- |
//! | `RL.ACQUIRE 3 bucket leases request now ...` | `acquire.lua` |
//! | `RL.ACQUIRE_ALL n+2 buckets.. leases request now n ...` | `acquire_all.lua` |
//! | `RL.PEEK 1 bucket now` | `peek.lua` |
//! | `RL.RELEASE 1 leases now lease` | `release.lua` |
//! | `RL.RESET 2 bucket leases` | `DEL bucket leases` |
//! | `RL.REFUND 1 bucket now limit per_ms cost policy` | `refund.lua` |
//!
//! Writes are replicated as the commands a script would have replicated (`SET .. PXAT`, `ZADD`,
//! `HSET`, ...), never as `RL.*` themselves: a replica or an AOF needs no module, and replays no
//! decision with another clock.

// Unit tests build without the entry point, so the commands are unused there.
#![cfg_attr(test, allow(dead_code))]

mod stored;

use ratelimit::core::bucket::{Bucket, Kind, Policy};
use ratelimit::core::compound::{self, MAX_LIMITS};
use ratelimit::core::decision::{self, Ask, Reason, Verdict};
use ratelimit::core::lease::{self, Slots};
use ratelimit::core::request::{self, Judgement, Record, Terms};
use redis_module::raw::KeyType;
use redis_module::{
    CallOptionsBuilder, CallResult, Context, RedisError, RedisResult, RedisString, RedisValue,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use stored::{Read, Stored};

/// How long idle state outlives the moment it holds no more information (`GRACE_MS` of the
/// scripts): a margin for a decision clock that is not the one Redis expires keys by.
const GRACE_MS: i64 = 1_000;

/// The longest expiry the module sets: 2^53 ms, past every instant a value the core writes
/// holds (all below 2^53, the scripts' exact range). A value crafted with instants near
/// 2^63 would otherwise overflow the expiry's arithmetic: a panic in a debug build after the
/// key was written but before its write was replicated, a wrapped `PXAT` in the past (the
/// key deleted on replicas) in a release build.
pub(crate) const MAX_TTL_MS: i64 = 1 << 53;

/// How long state that holds information until `until` lives from `now`: at least
/// `GRACE_MS`, at most [`MAX_TTL_MS`], whatever the instants (saturating, never wrapping).
fn ttl_until(until: i64, now: i64) -> i64 {
    until
        .saturating_sub(now)
        .max(0)
        .saturating_add(GRACE_MS)
        .min(MAX_TTL_MS)
}

type Keys<'a> = &'a [RedisString];
type Args<'a> = &'a [RedisString];

fn fail(what: &str) -> RedisError {
    RedisError::String(format!("ERR ratelimit: {what}"))
}

/// Runs a command body on its keys and arguments: answers a keys-position request (a Cluster or
/// `COMMAND GETKEYS` asking which arguments are keys), and turns a panic into an error reply
/// (none may unwind into Redis).
fn guarded(
    ctx: &Context,
    args: &[RedisString],
    body: impl FnOnce(&Context, Keys, Args) -> RedisResult,
) -> RedisResult {
    let numkeys = args
        .get(1)
        .and_then(|a| num::<usize>(a).ok())
        // `2 + n` would overflow for a numkeys near 2^64 (a panic here, outside the guard
        // below, aborts redis-server).
        .filter(|&n| n >= 1 && n <= args.len().saturating_sub(2));
    let Some(n) = numkeys else {
        return Err(RedisError::WrongArity);
    };
    if ctx.is_keys_position_request() {
        for i in 2..2 + n {
            ctx.key_at_pos(i as i32);
        }
        return Ok(RedisValue::NoReply);
    }
    let (keys, rest) = args[2..].split_at(n);
    catch_unwind(AssertUnwindSafe(|| body(ctx, keys, rest)))
        .unwrap_or_else(|_| Err(fail("internal error")))
}

/// A numeric argument, as `str::parse` reads it; plain digits (every number a client sends)
/// without it (as text, a plain call's numbers were a twentieth of its time, callgrind).
fn num<T: std::str::FromStr + TryFrom<u64>>(a: &RedisString) -> Result<T, RedisError> {
    let b = a.as_slice();
    // 19 digits at most: no u64 overflow.
    if (1..=19).contains(&b.len()) && b.iter().all(u8::is_ascii_digit) {
        let n = b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        if let Ok(n) = T::try_from(n) {
            return Ok(n);
        }
    }
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| fail("a numeric argument is not a number"))
}

/// A call's cost in tokens, at most the largest limit (as every client sends it): its
/// milli-tokens must fit 64 bits, or `cost * 1000` wraps in a release build into a few, and
/// the call is admitted where the scripts (in doubles) deny it.
fn cost(a: &RedisString) -> Result<u64, RedisError> {
    let c: u64 = num(a)?;
    if c > ratelimit::core::bucket::MAX_LIMIT {
        return Err(fail("a cost out of bounds"));
    }
    Ok(c)
}

fn arg<'a>(args: Args<'a>, i: usize) -> Result<&'a RedisString, RedisError> {
    args.get(i).ok_or(RedisError::WrongArity)
}

/// The server's clock in ms, as `TIME` reads it inside a script (`gettimeofday`).
fn server_ms() -> i64 {
    // SAFETY: RedisModule_Milliseconds is filled in by RedisModule_Init before any command of
    // this module can run, takes no argument and only reads the clock; it is called on the
    // thread Redis runs this command on.
    match unsafe { redis_module::raw::RedisModule_Milliseconds } {
        Some(f) => unsafe { f() },
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
    }
}

/// The decision's time: the caller's when given (a server refusing TIME, a test's manual
/// clock), else the server's.
fn now_of(a: &RedisString) -> Result<i64, RedisError> {
    if a.as_slice().is_empty() {
        Ok(server_ms())
    } else {
        num(a)
    }
}

/// A limit, its period and its policy's code (`Kind::code`; left out: a token bucket, as the
/// scripts read a missing one).
fn policy(
    limit: &RedisString,
    per: &RedisString,
    kind: Option<&RedisString>,
) -> Result<Policy, RedisError> {
    let p =
        Policy::new(num(limit)?, num(per)?).map_err(|_| fail("a limit or period out of bounds"))?;
    match kind {
        None => Ok(p.with_kind(Kind::TokenBucket)),
        // `Policy::code_arg`: the kind's code, and a stepped bucket's amount after a colon.
        Some(k) => p
            .with_code_arg(k.as_slice())
            .ok_or_else(|| fail("an unknown policy code")),
    }
}

/// A command the scripts would have run with `redis.call`, its effect replicated as such.
fn write(ctx: &Context, cmd: &str, args: &[&[u8]]) -> RedisResult {
    let opts = CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build();
    let r: CallResult = ctx.call_ext(cmd, &opts, args);
    r.map(|v| (&v).into()).map_err(RedisError::from)
}

fn read(ctx: &Context, cmd: &str, args: &[&[u8]]) -> RedisResult {
    ctx.call(cmd, args)
}

fn int(v: &RedisValue) -> i64 {
    match v {
        RedisValue::Integer(i) => *i,
        _ => 0,
    }
}

fn text(v: &RedisValue) -> Option<&[u8]> {
    match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.as_bytes()),
        RedisValue::StringBuffer(b) => Some(b),
        _ => None,
    }
}

/// A sorted-set score or a hash field as Lua's `tonumber` reads the ones ratelimit writes.
fn number(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    s.parse::<i64>().ok().or_else(|| {
        s.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| f as i64)
    })
}

/// The first command on a name that must hold `expected` (leases: a sorted set; a request's
/// record: a hash) or nothing: a value of another type there (another tenant of a shared Redis)
/// is deleted and the call fails as damaged (`first_on` of bucket.lua).
fn first_on(
    ctx: &Context,
    what: &str,
    key: &RedisString,
    expected: KeyType,
) -> Result<(), RedisError> {
    let t = ctx.open_key(key).key_type();
    if t == KeyType::Empty || t == expected {
        return Ok(());
    }
    write(ctx, "DEL", &[key.as_slice()])?;
    Err(RedisError::String(format!(
        "RLCORRUPT a value at a name of {what} ratelimit did not write, deleted"
    )))
}

/// The score of the first (`"0"`) or last (`"-1"`) lease by expiry.
fn lease_score(ctx: &Context, leases: &RedisString, at: &str) -> Result<Option<i64>, RedisError> {
    let r = read(
        ctx,
        "ZRANGE",
        &[
            leases.as_slice(),
            at.as_bytes(),
            at.as_bytes(),
            b"WITHSCORES",
        ],
    )?;
    Ok(match &r {
        RedisValue::Array(a) => a.get(1).and_then(text).and_then(number),
        _ => None,
    })
}

/// The subject's live leases (`ZREMRANGEBYSCORE` of the expired ones first): how many were
/// expired, and the slots left.
fn expire_leases(
    ctx: &Context,
    leases: &RedisString,
    now: i64,
) -> Result<(i64, Slots), RedisError> {
    first_on(ctx, "leases", leases, KeyType::ZSet)?;
    let now_s = now.to_string();
    let expired = int(&write(
        ctx,
        "ZREMRANGEBYSCORE",
        &[leases.as_slice(), b"-inf", now_s.as_bytes()],
    )?);
    let live = int(&read(ctx, "ZCARD", &[leases.as_slice()])?).max(0) as u64;
    let earliest = if live > 0 {
        lease_score(ctx, leases, "0")?
    } else {
        None
    };
    Ok((
        expired,
        Slots {
            live,
            earliest_expiry: earliest,
        },
    ))
}

/// Takes the lease (when `take`), and keeps the leases' set as long as its last lease, and
/// a second. Returns the last lease's expiry when the set holds one.
fn keep_leases(
    ctx: &Context,
    leases: &RedisString,
    take: Option<(&RedisString, u64)>,
    live: u64,
    now: i64,
) -> Result<Option<i64>, RedisError> {
    if let Some((id, ttl)) = take {
        let at = lease::expiry(now, ttl).to_string();
        write(
            ctx,
            "ZADD",
            &[leases.as_slice(), at.as_bytes(), id.as_slice()],
        )?;
    }
    if live == 0 && take.is_none() {
        return Ok(None);
    }
    let Some(latest) = lease_score(ctx, leases, "-1")? else {
        return Ok(None);
    };
    let ttl = ttl_until(latest, now).to_string();
    write(ctx, "PEXPIRE", &[leases.as_slice(), ttl.as_bytes()])?;
    Ok(Some(latest))
}

/// The bucket at `key`, or the damaged-store answer of the scripts (`damaged` in bucket.lua):
/// an empty bucket stamped now written in its place (it refills as the policy allows), and the
/// call fails.
fn bucket(
    ctx: &Context,
    key: &RedisString,
    p: &Policy,
    now: i64,
) -> Result<Option<Stored>, RedisError> {
    match stored::read(ctx, key)? {
        Read::Missing => Ok(None),
        Read::Found(s) => Ok(Some(s)),
        Read::Damaged => Err(damaged(ctx, key, p, now)),
    }
}

/// What the scripts do with a damaged bucket (`damaged` in bucket.lua): an empty bucket stamped
/// now written in its place, and the call's error.
fn damaged(ctx: &Context, key: &RedisString, p: &Policy, now: i64) -> RedisError {
    let empty = Stored {
        // An empty token bucket whatever the policy, as the scripts write it: a window's call
        // converts it (nothing available), and it refills as the policy allows.
        bucket: Bucket::tokens_at(0, now),
        full_at: now.saturating_add(p.per_ms() as i64),
        used_at: now,
        counts: [0; 3],
        binary: false,
    };
    match stored::write(ctx, key, &empty, p.per_ms() as i64 + GRACE_MS) {
        Ok(()) => RedisError::Str(
            "RLCORRUPT a bucket value ratelimit did not write, replaced by an empty bucket",
        ),
        Err(e) => e,
    }
}

fn keep_bucket(
    ctx: &Context,
    key: &RedisString,
    s: &Stored,
    last_lease: Option<i64>,
    now: i64,
) -> Result<(), RedisError> {
    let last = last_lease.map_or(s.full_at, |l| l.max(s.full_at));
    stored::write(ctx, key, s, ttl_until(last, now))
}

/// Counts a decision in a bucket's counts (allowed, rate-denied, inflight-denied), saturating:
/// a stored count is whatever the value held (red team: one at u64::MAX overflowed, a panic in
/// a debug build, a count wrapped to 0 in a release one).
fn count_decision(counts: &mut [u64; 3], reason: Reason) {
    let c = &mut counts[code(reason).min(2) as usize];
    *c = c.saturating_add(1);
}

/// The code of a reason in a reply: 0 ok, 1 rate, 2 inflight, 3 in progress.
fn code(r: Reason) -> i64 {
    match r {
        Reason::Ok => 0,
        Reason::Rate => 1,
        Reason::Inflight => 2,
        Reason::InProgress | Reason::Unavailable => 3,
    }
}

fn i(v: u64) -> RedisValue {
    RedisValue::Integer(clamped(v))
}

fn clamped(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// RL.ACQUIRE's reply, as acquire.lua's: the verdict (reason, remaining, retry_after,
/// reset_after, next_token), flags, lease, expired, then the booking's wait and the tokens owed.
/// Written as it is made, with no array of values built first (a tenth of a plain call's time,
/// callgrind, issue 24): the bytes `Context::reply` wrote of that array.
fn reply_acquire(
    ctx: &Context,
    v: &Verdict,
    flags: i64,
    lease: &[u8],
    expired: i64,
) -> RedisResult {
    use redis_module::raw;
    let c = ctx.get_raw();
    raw::reply_with_array(c, 10);
    for n in [
        code(v.reason),
        clamped(v.remaining),
        clamped(v.retry_after_ms),
        clamped(v.reset_after_ms),
        clamped(v.next_token_ms),
        flags,
    ] {
        raw::reply_with_long_long(c, n);
    }
    raw::reply_with_string_buffer(c, lease.as_ptr().cast(), lease.len());
    raw::reply_with_long_long(c, expired);
    raw::reply_with_long_long(c, clamped(v.wait_ms));
    raw::reply_with_long_long(c, clamped(v.reserved));
    Ok(RedisValue::NoReply)
}

/// A verdict as the scripts send one: reason, remaining, retry_after, reset_after,
/// next_token, dry_run.
fn verdict_reply(v: &Verdict) -> Vec<RedisValue> {
    vec![
        RedisValue::Integer(code(v.reason)),
        i(v.remaining),
        i(v.retry_after_ms),
        i(v.reset_after_ms),
        i(v.next_token_ms),
        RedisValue::Integer(i64::from(v.dry_run)),
    ]
}

/// The request id's part of a call: its record's key, the bucket it is charged to and the
/// terms (hex, as the scripts get them), and the replays to remember.
struct RequestArgs<'a> {
    key: &'a RedisString,
    bucket: &'a RedisString,
    terms: &'a RedisString,
    replays: u64,
}

/// Reads the record of a request id and judges the call by `core::request::judge` (the
/// record's lease looked up in `leases`), counting a replay down (the last one forgets the
/// record): `judged_request` of request.lua.
fn judged(
    ctx: &Context,
    q: &RequestArgs,
    leases: &RedisString,
    now: i64,
) -> Result<Judgement, RedisError> {
    first_on(ctx, "a request record", q.key, KeyType::Hash)?;
    let r = read(
        ctx,
        "HMGET",
        &[q.key.as_slice(), b"b", b"l", b"t", b"n", b"e"],
    )?;
    let f: Vec<Option<Vec<u8>>> = match &r {
        RedisValue::Array(a) => a.iter().map(|v| text(v).map(<[u8]>::to_vec)).collect(),
        _ => Vec::new(),
    };
    let field = |i: usize| f.get(i).and_then(Option::as_deref);
    let (b, l, t, n, e) = (field(0), field(1), field(2), field(3), field(4));
    let mut lease_until = None;
    if let (Some(_), Some(l)) = (t, l) {
        if !l.is_empty() {
            let s = read(ctx, "ZSCORE", &[leases.as_slice(), l])?;
            lease_until = text(&s).and_then(number);
        }
    }
    // A record ratelimit did not write (a field missing or malformed) is none.
    let left = n.and_then(number).unwrap_or(0);
    let record = match (
        b.and_then(lease::hex16),
        t.and_then(lease::hex16),
        e.and_then(number),
    ) {
        (Some(bucket), Some(terms), Some(expires)) => Some(Record {
            bucket,
            terms: Terms(terms),
            replays_left: left.clamp(0, i64::from(u32::MAX)) as u32,
            expires,
        }),
        _ => None,
    };
    let bucket =
        lease::hex16(q.bucket.as_slice()).ok_or_else(|| fail("a bucket name is not hex"))?;
    let terms = lease::hex16(q.terms.as_slice()).ok_or_else(|| fail("terms are not hex"))?;
    let j = request::judge(record.as_ref(), &bucket, &Terms(terms), now, lease_until);
    if j == Judgement::Replay {
        if left - 1 <= 0 {
            write(ctx, "DEL", &[q.key.as_slice()])?;
        } else {
            let left = (left - 1).to_string();
            write(ctx, "HSET", &[q.key.as_slice(), b"n", left.as_bytes()])?;
        }
    }
    Ok(j)
}

/// The lease an admitted call took (empty: none), its request id's record written when the
/// call carries one: the tail RL.ACQUIRE and RL.ACQUIRE_ALL share.
fn remember_admission<'a>(
    ctx: &Context,
    q: &RequestArgs,
    admitted: bool,
    take: Option<(&'a RedisString, u64)>,
    request_ttl: u64,
    now: i64,
) -> Result<&'a [u8], RedisError> {
    let lease: &[u8] = take.map_or(b"", |(id, _)| id.as_slice());
    if admitted && request_ttl > 0 {
        let lease_ttl = take.map(|(_, ttl)| ttl);
        remember(
            ctx,
            q,
            lease,
            request::expiry(now, request_ttl, lease_ttl),
            now,
        )?;
    }
    Ok(lease)
}

/// Remembers an admission (replacing any record) until `expires`: `remember_request` of
/// request.lua; not at all when it could only ever be judged fresh.
fn remember(
    ctx: &Context,
    q: &RequestArgs,
    lease: &[u8],
    expires: i64,
    now: i64,
) -> Result<(), RedisError> {
    write(ctx, "DEL", &[q.key.as_slice()])?;
    if request::worth_remembering(q.replays.min(u64::from(u32::MAX)) as u32, !lease.is_empty()) {
        let (n, e) = (q.replays.to_string(), expires.to_string());
        write(
            ctx,
            "HSET",
            &[
                q.key.as_slice(),
                b"b",
                q.bucket.as_slice(),
                b"l",
                lease,
                b"t",
                q.terms.as_slice(),
                b"n",
                n.as_bytes(),
                b"e",
                e.as_bytes(),
            ],
        )?;
        let ttl = ttl_until(expires, now).to_string();
        write(ctx, "PEXPIRE", &[q.key.as_slice(), ttl.as_bytes()])?;
    }
    Ok(())
}

/// A call with no slot and no request id: refill, check, take, one bucket read and written.
fn plain_acquire(
    ctx: &Context,
    bk: &RedisString,
    p: Policy,
    cost: u64,
    dry: bool,
    now: i64,
) -> RedisResult {
    let opened = stored::Opened::new(ctx, bk);
    let stored = match opened.read()? {
        Read::Missing => None,
        Read::Found(s) => Some(s),
        Read::Damaged => {
            drop(opened);
            return Err(damaged(ctx, bk, &p, now));
        }
    };
    let ask = Ask {
        policy: p,
        cost,
        max_inflight: 0,
        dry_run: dry,
        request: None,
        max_wait_ms: None,
    };
    let d = decision::decide(stored.map(|s| s.bucket), &ask, Slots::default(), now);
    let mut counts = stored.map_or([0; 3], |s| s.counts);
    count_decision(&mut counts, d.verdict.reason);
    let s = Stored::decided(d.bucket, &p, counts, stored.as_ref(), now);
    opened.write(ctx, &s, ttl_until(s.full_at, now))?;
    let flags = i64::from(d.verdict.dry_run) + 4 * i64::from(d.clock_regressed);
    reply_acquire(ctx, &d.verdict, flags, b"", 0)
}

/// A reservation's longest wait in ms ("inf": any), the 14th argument of the full form.
fn max_wait(a: Option<&RedisString>) -> Result<Option<u64>, RedisError> {
    match a.map(RedisString::as_slice) {
        None => Ok(None),
        Some(b"inf") => Ok(Some(u64::MAX)),
        Some(_) => Ok(Some(num(a.expect("matched Some"))?)),
    }
}

/// `RL.ACQUIRE 3 bucket leases request now limit per_ms cost max_inflight lease_ttl_ms lease
/// dry_run request_ttl_ms bucket_name terms replays policy [max_wait]`: acquire.lua (with
/// `max_wait`, ms or `inf`, a reservation: `ratelimit_reserve`). A plain call (no slot,
/// no request id) may take the short form `RL.ACQUIRE 1 bucket now limit per_ms cost [dry_run
/// [policy]]`:
/// the script never touches the other two keys of such a call, and every argument parsed costs
/// the server time on the hot path.
fn acquire(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guarded(ctx, args, |ctx, keys, a| {
        let full = match keys {
            [_] if (4..=6).contains(&a.len()) => false,
            [_, _, _] if (12..=14).contains(&a.len()) => true,
            _ => return Err(RedisError::WrongArity),
        };
        let bk = &keys[0];
        let now = now_of(arg(a, 0)?)?;
        let kind = a.get(if full { 12 } else { 5 });
        let p = policy(arg(a, 1)?, arg(a, 2)?, kind)?;
        let cost = cost(arg(a, 3)?)?;
        if !full {
            let dry = a.get(4).is_some_and(|d| d.as_slice() == b"1");
            return plain_acquire(ctx, bk, p, cost, dry, now);
        }
        let (lk, qk) = (&keys[1], &keys[2]);
        let max_inflight: u64 = num(arg(a, 4)?)?;
        let lease_ttl: u64 = num(arg(a, 5)?)?;
        let lease_id = arg(a, 6)?;
        let dry = arg(a, 7)?.as_slice() == b"1";
        let request_ttl: u64 = num(arg(a, 8)?)?;
        let q = RequestArgs {
            key: qk,
            bucket: arg(a, 9)?,
            terms: arg(a, 10)?,
            replays: if request_ttl > 0 {
                num(arg(a, 11)?)?
            } else {
                0
            },
        };

        // A replay or a retry in progress takes nothing and writes no bucket; either tells the
        // bucket as it stands (a peek).
        if request_ttl > 0 {
            let j = judged(ctx, &q, lk, now)?;
            if j != Judgement::Fresh {
                let stored = bucket(ctx, bk, &p, now)?.map(|s| s.bucket);
                let peeked = decision::peek(stored, &p, now);
                let (v, flags) = match j {
                    Judgement::InProgress { until } => (
                        decision::as_in_progress(peeked, until, now, dry),
                        i64::from(dry),
                    ),
                    _ => (decision::as_replay(peeked), 2),
                };
                return reply_acquire(ctx, &v, flags, b"", 0);
            }
        }

        let (expired, slots) = if max_inflight > 0 {
            expire_leases(ctx, lk, now)?
        } else {
            (0, Slots::default())
        };
        let stored = bucket(ctx, bk, &p, now)?;
        let ask = Ask {
            policy: p,
            cost,
            max_inflight,
            dry_run: dry,
            request: None,
            max_wait_ms: max_wait(a.get(13))?,
        };
        let d = decision::decide(stored.map(|s| s.bucket), &ask, slots, now);
        let mut counts = stored.map_or([0; 3], |s| s.counts);
        count_decision(&mut counts, d.verdict.reason);
        let take =
            (d.verdict.reason == Reason::Ok && max_inflight > 0 && !lease_id.as_slice().is_empty())
                .then_some((lease_id, lease_ttl));
        let last_lease = keep_leases(ctx, lk, take, slots.live, now)?;
        let s = Stored::decided(d.bucket, &p, counts, stored.as_ref(), now);
        keep_bucket(ctx, bk, &s, last_lease, now)?;
        let lease = remember_admission(
            ctx,
            &q,
            d.verdict.reason == Reason::Ok,
            take,
            request_ttl,
            now,
        )?;
        let flags = i64::from(d.verdict.dry_run) + 4 * i64::from(d.clock_regressed);
        reply_acquire(ctx, &d.verdict, flags, lease, expired)
    })
}

/// `RL.ACQUIRE_ALL n+2 buckets.. leases request now n lease_ttl_ms lease request_ttl_ms
/// first_bucket_name max_inflight terms replays (limit per_ms cost dry_run policy)*n`:
/// acquire_all.lua, all or nothing by `core::compound::decide_all`.
fn acquire_all(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, &args, |ctx, keys, a| {
        let now = now_of(arg(a, 0)?)?;
        let n: usize = num(arg(a, 1)?)?;
        if n == 0 || n > MAX_LIMITS || keys.len() != n + 2 || a.len() != 9 + 5 * n {
            return Err(RedisError::WrongArity);
        }
        let (buckets, lk, qk) = (&keys[..n], &keys[n], &keys[n + 1]);
        let lease_ttl: u64 = num(arg(a, 2)?)?;
        let lease_id = arg(a, 3)?;
        let request_ttl: u64 = num(arg(a, 4)?)?;
        let max_inflight: u64 = num(arg(a, 6)?)?;
        let q = RequestArgs {
            key: qk,
            bucket: arg(a, 5)?,
            terms: arg(a, 7)?,
            replays: if request_ttl > 0 { num(arg(a, 8)?)? } else { 0 },
        };
        let mut asks = Vec::with_capacity(n);
        let mut stored = Vec::with_capacity(n);
        for (k, key) in buckets.iter().enumerate() {
            let o = 9 + 5 * k;
            let p = policy(arg(a, o)?, arg(a, o + 1)?, Some(arg(a, o + 4)?))?;
            asks.push(Ask {
                policy: p,
                cost: cost(arg(a, o + 2)?)?,
                max_inflight: if k == 0 { max_inflight } else { 0 },
                dry_run: arg(a, o + 3)?.as_slice() == b"1",
                request: None,
                max_wait_ms: None,
            });
            stored.push(bucket(ctx, key, &p, now)?);
        }
        let as_is: Vec<Option<Bucket>> = stored.iter().map(|s| s.map(|s| s.bucket)).collect();

        if request_ttl > 0 {
            let j = judged(ctx, &q, lk, now)?;
            if j != Judgement::Fresh {
                let each: Vec<RedisValue> = asks
                    .iter()
                    .zip(&as_is)
                    .flat_map(|(a, s)| verdict_reply(&decision::peek(*s, &a.policy, now)))
                    .collect();
                let (flags, ends) = match j {
                    Judgement::InProgress { until } => (8, until.saturating_sub(now).max(0)),
                    _ => (2, 0),
                };
                return Ok(RedisValue::Array(vec![
                    RedisValue::Integer(0),
                    RedisValue::Integer(flags),
                    RedisValue::StringBuffer(Vec::new()),
                    RedisValue::Integer(ends),
                    RedisValue::Array(vec![RedisValue::Integer(0); 6]),
                    RedisValue::Array(each),
                ]));
            }
        }

        let (expired, slots) = if max_inflight > 0 {
            expire_leases(ctx, lk, now)?
        } else {
            (0, Slots::default())
        };
        let d = compound::decide_all(&as_is, &asks, slots, now);
        let all = d.verdict.took();
        let take = (all && max_inflight > 0 && !lease_id.as_slice().is_empty())
            .then_some((lease_id, lease_ttl));
        let last_lease = keep_leases(ctx, lk, take, slots.live, now)?;
        for (k, key) in buckets.iter().enumerate() {
            let mut counts = stored[k].map_or([0; 3], |s| s.counts);
            if k == d.reported {
                count_decision(&mut counts, d.verdict.reason);
            }
            let last = if k == 0 { last_lease } else { None };
            let s = Stored::decided(
                d.buckets[k],
                &asks[k].policy,
                counts,
                stored[k].as_ref(),
                now,
            );
            keep_bucket(ctx, key, &s, last, now)?;
        }
        let lease = remember_admission(ctx, &q, all, take, request_ttl, now)?;
        Ok(RedisValue::Array(vec![
            RedisValue::Integer(d.reported as i64),
            RedisValue::Integer(4 * i64::from(d.clock_regressed)),
            RedisValue::StringBuffer(lease.to_vec()),
            RedisValue::Integer(expired),
            RedisValue::Array(verdict_reply(&d.verdict)),
            RedisValue::Array(d.each.iter().flat_map(verdict_reply).collect()),
        ]))
    })
}

/// `RL.PEEK 1 bucket now`: peek.lua, read-only: the bucket's milli-tokens and stamp (nil when
/// missing), the time, its policy's code and its previous window's milli-tokens, for the
/// client's core to answer from.
fn peek(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, &args, |ctx, keys, a| {
        let now = now_of(arg(a, 0)?)?;
        let now = RedisValue::BulkString(now.to_string());
        match stored::read(ctx, &keys[0])? {
            Read::Damaged => Err(RedisError::Str(
                "RLCORRUPT a bucket value ratelimit did not write",
            )),
            Read::Found(s) => Ok(RedisValue::Array(vec![
                RedisValue::BulkString(s.bucket.tokens.to_string()),
                RedisValue::BulkString(s.bucket.stamp.to_string()),
                now,
                RedisValue::Integer(i64::from(s.bucket.kind.code())),
                RedisValue::BulkString(s.bucket.prev.to_string()),
            ])),
            Read::Missing => Ok(RedisValue::Array(vec![
                RedisValue::Null,
                RedisValue::Null,
                now,
                RedisValue::Integer(0),
                RedisValue::BulkString("0".into()),
            ])),
        }
    })
}

/// `RL.RELEASE 1 leases now lease`: release.lua: frees the lease if it is still live.
fn release(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, &args, |ctx, keys, a| {
        let now = now_of(arg(a, 0)?)?;
        let (lk, id) = (&keys[0], arg(a, 1)?);
        first_on(ctx, "leases", lk, KeyType::ZSet)?;
        let e = read(ctx, "ZSCORE", &[lk.as_slice(), id.as_slice()])?;
        let live = text(&e)
            .and_then(number)
            .is_some_and(|e| lease::is_live(e, now));
        if live {
            write(ctx, "ZREM", &[lk.as_slice(), id.as_slice()])?;
        }
        Ok(RedisValue::Integer(i64::from(live)))
    })
}

/// `RL.RESET 2 bucket leases`: forgets a bucket and its leases (`DEL`), how many keys were.
fn reset(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, &args, |ctx, keys, _| {
        let names: Vec<&[u8]> = keys.iter().map(RedisString::as_slice).collect();
        write(ctx, "DEL", &names)
    })
}

/// `RL.REFUND 1 bucket now limit per_ms cost policy`: refund.lua: `core::bucket::refund` on the
/// stored bucket, written back (keeping its expiry) when tokens were given back. Flags: 1 given
/// back, 4 the clock was seen going backwards.
fn refund(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, &args, |ctx, keys, a| {
        let now = now_of(arg(a, 0)?)?;
        let p = policy(arg(a, 1)?, arg(a, 2)?, Some(arg(a, 4)?))?;
        let cost: u64 = num(arg(a, 3)?)?;
        let bk = &keys[0];
        let Some(s) = bucket(ctx, bk, &p, now)? else {
            return Ok(RedisValue::Integer(0));
        };
        let milli = cost.saturating_mul(ratelimit::core::bucket::MILLI);
        let Some(r) = ratelimit::core::bucket::refund(Some(s.bucket), &p, milli, now) else {
            return Ok(RedisValue::Integer(0));
        };
        let flags = 4 * i64::from(r.clock_regressed);
        if r.given == 0 {
            return Ok(RedisValue::Integer(flags));
        }
        // The bucket is full no later than before: its expiry (covering its leases) stays.
        let ttl = int(&read(ctx, "PTTL", &[bk.as_slice()])?);
        let full_at = r.bucket.full_at(&p);
        let ttl = if ttl > 0 {
            ttl
        } else {
            ttl_until(full_at, now)
        };
        let written = Stored {
            bucket: r.bucket,
            full_at,
            used_at: now,
            counts: s.counts,
            binary: s.binary,
        };
        stored::write(ctx, bk, &written, ttl)?;
        Ok(RedisValue::Integer(flags + 1))
    })
}

/// The most arguments [`acquire_command`] borrows on the stack (RL.ACQUIRE's full form with a
/// reservation has 19); a call with more (wrong arity) is handed over in a vector.
const BORROWED: usize = 20;

/// A command's arguments borrowed from Redis for the call, not retained: each is given back
/// (its pointer forgotten) before the array drops, also when a panic unwinds through it.
struct Borrowed([RedisString; BORROWED]);

impl Drop for Borrowed {
    fn drop(&mut self) {
        for a in &mut self.0 {
            a.inner = std::ptr::null_mut();
        }
    }
}

/// RL.ACQUIRE's entry point, the crate's wrapper of a command (`redis_command!`) without its
/// vector of arguments: each argument there is retained, then freed, in a vector allocated
/// for the call (a thirtieth of a plain call's time, callgrind, issue 24). The arguments are
/// only read during the call, as Redis lends them.
extern "C" fn acquire_command(
    ctx: *mut redis_module::raw::RedisModuleCtx,
    argv: *mut *mut redis_module::raw::RedisModuleString,
    argc: std::os::raw::c_int,
) -> std::os::raw::c_int {
    let context = Context::new(ctx);
    let n = usize::try_from(argc).unwrap_or(0);
    let r = if argv.is_null() || n > BORROWED {
        acquire(&context, &redis_module::decode_args(ctx, argv, argc))
    } else {
        // SAFETY: Redis calls a command with `argc` valid strings at `argv` (not null: checked
        // above), alive until the command returns; they are read during the call only and
        // never freed here (`Borrowed`).
        let raw = unsafe { std::slice::from_raw_parts(argv, n) };
        let args = Borrowed(std::array::from_fn(|i| {
            let inner = raw.get(i).copied().unwrap_or(std::ptr::null_mut());
            RedisString::from_redis_module_string(ctx, inner)
        }));
        acquire(&context, &args.0[..n])
    };
    context.reply(r) as std::os::raw::c_int
}

// The module's entry point and Redis's allocator, outside unit tests (which run without Redis).
#[cfg(not(test))]
mod entry {
    use super::{acquire_all, acquire_command, peek, refund, release, reset};
    use redis_module::{raw, redis_module, Context, RedisString, Status};

    /// RL.ACQUIRE, registered by hand with its own entry point (see [`acquire_command`]), as
    /// `redis_command!` registers the others (same flags, no ACL category).
    fn init(ctx: &Context, _: &[RedisString]) -> Status {
        // SAFETY: RedisModule_CreateCommand is filled in by RedisModule_Init before this runs
        // (from RedisModule_OnLoad, on Redis's thread: nothing writes it meanwhile), and is
        // called with the load's context; the name and flags are NUL-terminated strings Redis
        // copies.
        let r = unsafe {
            raw::RedisModule_CreateCommand.map(|create| {
                create(
                    ctx.get_raw(),
                    c"rl.acquire".as_ptr(),
                    Some(acquire_command),
                    c"write deny-oom getkeys-api".as_ptr(),
                    0,
                    0,
                    0,
                )
            })
        };
        if r == Some(raw::Status::Ok as std::os::raw::c_int) {
            Status::Ok
        } else {
            ctx.log_warning("Error: failed to create command rl.acquire");
            Status::Err
        }
    }

    redis_module! {
        name: "ratelimit",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: init,
        commands: [
            ["rl.acquire_all", acquire_all, "write deny-oom getkeys-api", 0, 0, 0, ""],
            ["rl.peek", peek, "readonly getkeys-api", 0, 0, 0, ""],
            ["rl.release", release, "write getkeys-api", 0, 0, 0, ""],
            ["rl.reset", reset, "write getkeys-api", 0, 0, 0, ""],
            ["rl.refund", refund, "write deny-oom getkeys-api", 0, 0, 0, ""],
        ],
    }
}
