//! The lean script path (issue 24): a plain acquire (no in-flight slot, no request id) as a
//! Redis Function (`lua/lean.lua` after `lua/bucket.lua`), where the server has Functions
//! (Redis 7.0+) and no native commands. Managed services load no modules but run Functions, so
//! this is their fast path; every other call stays on the EVALSHA scripts.
//!
//! What it saves over `acquire.lua` (measured: see the commit and bench/redis/results.md):
//! the helpers of bucket.lua are built once, at `FUNCTION LOAD`, not on every call; one key and
//! four to six arguments; and the reply is the state the decision left, from which the core
//! computes the verdict's numbers here (`core::decision::standing`), at the server's `now`
//! that the reply carries. The decision itself (refill, check, take, write) must stay in the
//! function: it is one atomic step of the store, and a second round trip to take what a first
//! one read would let two hosts take the same tokens.
//!
//! Loading: one library per version of the code (`ratelimit_<hash>`, its function
//! `rl_acquire_<hash>`), so hosts of two builds during an upgrade each find their own and never
//! replace each other's. A call that meets "Function not found" (a fresh server, `FUNCTION
//! FLUSH`, a restart without persistence, a failover to a replica that never had it) loads the
//! library on the same connection and calls again, as the redis crate does for `NOSCRIPT`. A
//! server without Functions (before 7.0, or `FCALL`/`FUNCTION` refused or renamed) did nothing,
//! and this store uses the EVALSHA scripts from then on (again after a reconnect).
//!
//! The stored value is acquire.lua's, byte for byte, so that hosts on the scripts, the
//! Functions and the module share every bucket (tests/redis_module.rs mixes the three).

use super::conn::Route;
use super::link::Link;
use super::module::Path;
use super::{field, resp, RedisStore};
use crate::core::bucket::{Bucket, MILLI};
use crate::core::counters::Counters;
use crate::core::decision::{self, Ask, Reason, Source, Verdict};
use crate::core::subject::BucketKey;
use crate::storage::{Acquired, ErrorKind, StoreError};
use redis::{ConnectionLike, RedisError};
use std::sync::{Arc, OnceLock};

/// Whether this store calls the Function.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Functions {
    /// Tried on the next plain acquire.
    Try,
    /// Not on this server: the scripts, until the next detection of the server (a reconnect).
    Off,
    /// Ruled out for this store (tests comparing the paths): the scripts for good.
    Never,
}

/// The library's source and its function's name, made once per process.
struct Library {
    code: String,
    /// The function's name.
    name: String,
    /// The library's name.
    library: String,
}

/// 64-bit FNV-1a: the same version on every host that runs the same code.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The library of a host writing new buckets in text, or in binary (another version: the two
/// never replace each other).
fn library(binary: bool) -> &'static Library {
    static L: [OnceLock<Library>; 2] = [OnceLock::new(), OnceLock::new()];
    L[usize::from(binary)].get_or_init(|| {
        let body = format!(
            "{}\n{}",
            super::bucket_lua(binary),
            include_str!("lua/lean.lua")
        );
        let version = format!("{:016x}", fnv1a(&body));
        let name = format!("rl_acquire_{version}");
        let library = format!("ratelimit_{version}");
        let code = format!(
            "#!lua name={library}\n{}",
            body.replace("RL_FN_NAME", &name)
        );
        Library {
            code,
            name,
            library,
        }
    })
}

/// The function's reply: the state the decision left (see lean.lua).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct LeanReply {
    /// 0 admitted, 1 denied by the rate.
    code: u8,
    /// Milli-tokens.
    tokens: u64,
    stamp: i64,
    /// The previous window's milli-tokens.
    prev: u64,
    /// The server's clock the decision was made at.
    now: i64,
    /// 1 a dry run's denial, 4 the clock went back.
    flags: u8,
}

impl LeanReply {
    /// The reply read straight from the start of `bytes`, and its length: six integers, each
    /// in its field's range. None for anything else, or bytes that end before it does; what it
    /// declines is read as a `Value` by [`redis::FromRedisValue`], to the same result.
    fn from_resp(bytes: &[u8]) -> Option<(Self, usize)> {
        let mut b = bytes.strip_prefix(b"*6\r\n")?;
        let code = u8::try_from(resp::integer(&mut b)?).ok()?;
        let tokens = u64::try_from(resp::integer(&mut b)?).ok()?;
        let stamp = resp::integer(&mut b)?;
        let prev = u64::try_from(resp::integer(&mut b)?).ok()?;
        let now = resp::integer(&mut b)?;
        let flags = u8::try_from(resp::integer(&mut b)?).ok()?;
        let reply = Self {
            code,
            tokens,
            stamp,
            prev,
            now,
            flags,
        };
        Some((reply, bytes.len() - b.len()))
    }
}

impl redis::FromRedisValue for LeanReply {
    /// Every field an integer in its range (`field`): a reply out of range is no reply, never
    /// a wrapped number.
    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        let redis::Value::Array(items) = v else {
            return Err("the Function's reply is not an array".into());
        };
        if items.len() != 6 {
            return Err("the Function's reply of an unexpected length".into());
        }
        let mut it = items.into_iter();
        let mut f = || it.next().unwrap_or_default();
        Ok(Self {
            code: field(f())?,
            tokens: field(f())?,
            stamp: field(f())?,
            prev: field(f())?,
            now: field(f())?,
            flags: field(f())?,
        })
    }
}

/// Writes into `out` (cleared first) the FCALL of a plain acquire, as `resp::pack` writes it
/// (tested to the byte): `FCALL function 1 bucket now limit per_ms cost [dry_run [policy]]`,
/// each number written from its value. Returns where the bucket's name lies in `out`.
fn pack_fcall(
    out: &mut Vec<u8>,
    function: &str,
    prefix: &str,
    key: &BucketKey,
    now: &str,
    ask: &Ask,
) -> std::ops::Range<usize> {
    let p = &ask.policy;
    let code = p.kind().code();
    let dry = ask.dry_run || code != 0;
    out.clear();
    resp::header(out, 8 + usize::from(dry) + usize::from(code != 0));
    resp::bulk(out, b"FCALL");
    resp::bulk(out, function.as_bytes());
    resp::bulk(out, b"1");
    let name = super::bulk_bucket_name(out, prefix, key);
    resp::bulk(out, now.as_bytes());
    resp::bulk_number(out, false, p.limit());
    resp::bulk_number(out, false, p.per_ms());
    resp::bulk_number(out, false, ask.cost);
    if dry {
        resp::bulk_number(out, false, u64::from(ask.dry_run));
    }
    if code != 0 {
        resp::bulk_number(out, false, u64::from(code));
    }
    name
}

/// Sends the packed FCALL and reads its reply, straight from its bytes when it has the usual
/// shape (an error reply is the call's error, as the crate's `query` makes it).
fn fcall_packed(c: &mut Link, packed: &[u8]) -> Result<LeanReply, RedisError> {
    match c.request_with(packed, LeanReply::from_resp)? {
        Ok(reply) => Ok(reply),
        Err(v) => Ok(redis::from_redis_value(v.extract_error()?)?),
    }
}

fn text(e: &RedisError) -> String {
    e.to_string().to_ascii_lowercase()
}

/// The packed FCALL of the library's function; `None` when the server has no Functions for
/// us. A server without the library (a fresh one, `FUNCTION FLUSH`, a failover) is given it, and
/// the same command sent again: it did nothing the first time.
fn fcall(c: &mut Link, lib: &Library, packed: &[u8]) -> Result<Option<LeanReply>, RedisError> {
    match fcall_packed(c, packed) {
        Err(e) if text(&e).contains("function not found") => {
            let loaded = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(&lib.code)
                .query::<String>(c);
            match loaded {
                // Another host loaded it meanwhile: as good.
                Err(e) if text(&e).contains("already exists") => {}
                // Refused (an ACL, a renamed command): no Functions for us.
                Err(e) if e.code().is_some() => return Ok(None),
                Err(e) => return Err(e),
                Ok(_) => prune(c, &lib.library),
            }
            fcall_packed(c, packed).map(Some)
        }
        Err(e) if no_functions(&e) => Ok(None),
        r => r.map(Some),
    }
}

/// How many libraries of other builds a load leaves on the server. Every build loads its own,
/// two with `ratelimit.redis_value_form` set both ways on a site (see the module's doc), so
/// without a bound a server kept for years collects one or two per deploy. Three builds side by
/// side (a rolling upgrade while an older one still runs), each with both value forms, never
/// delete each other's (red team: at three, two builds of both forms would have been the limit,
/// then each load deleted the others and they loaded again, over and over): the bound is passed
/// only once older builds' libraries pile up, and a build still running whose library was
/// deleted loads it again on its next call (one more round trip, once).
const KEEP_OTHERS: usize = 5;

/// Whether `name` is a library this code names (`ratelimit_` and 16 hex digits): a library of
/// someone else's, even one called `ratelimit_something`, is never deleted.
fn ours(name: &str) -> bool {
    name.strip_prefix("ratelimit_")
        .is_some_and(|v| v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// After loading this build's library: deletes the other builds' when there are more than
/// [`KEEP_OTHERS`]. Best effort: a failure (an ACL refusing `FUNCTION DELETE`, a library
/// deleted meanwhile by another host) changes nothing for the decision.
fn prune(c: &mut dyn ConnectionLike, mine: &str) {
    let Ok(list) = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("ratelimit_*")
        .query::<Vec<redis::Value>>(c)
    else {
        return;
    };
    let others: Vec<String> = list
        .iter()
        .filter_map(library_name)
        .filter(|n| ours(n) && n != mine)
        .collect();
    if others.len() <= KEEP_OTHERS {
        return;
    }
    for name in others {
        let _ = redis::cmd("FUNCTION")
            .arg("DELETE")
            .arg(&name)
            .query::<redis::Value>(c);
    }
}

/// `library_name` of one entry of `FUNCTION LIST` (a flat key, value array in RESP2, a map in
/// RESP3).
fn library_name(entry: &redis::Value) -> Option<String> {
    use redis::Value;
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match entry {
        Value::Array(kv) => kv
            .chunks(2)
            .find(|p| p.first().and_then(text).as_deref() == Some("library_name"))
            .and_then(|p| p.get(1).and_then(text)),
        Value::Map(kv) => kv
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some("library_name"))
            .and_then(|(_, v)| text(v)),
        _ => None,
    }
}

/// A server before 7.0, or one that refuses `FCALL` to this user: nothing was done.
fn no_functions(e: &RedisError) -> bool {
    let t = text(e);
    t.contains("unknown command") || e.code() == Some("NOPERM")
}

impl RedisStore {
    /// A plain acquire by the Function, or `None` when this store does not use it (the module
    /// is there, the server has no Functions, a slot, a request id or a reservation is asked
    /// for: lean.lua decides none of them).
    pub(super) fn lean_acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        carry: &mut Counters,
    ) -> Result<Option<Acquired>, StoreError> {
        // Only once the connection's path is known to be the scripts': the first decision of a
        // connection asks for the module within its own budget (`step`), and goes by EVALSHA.
        if self.functions != Functions::Try
            || self.path != Path::Script
            || ask.max_inflight > 0
            || ask.request.is_some()
            || ask.max_wait_ms.is_some()
            // The Function knows the policies of old; a stepped bucket goes to the script.
            || ask.policy.kind() == crate::core::bucket::Kind::SteppedBucket
        {
            return Ok(None);
        }
        let deadline = self.conn.budget();
        // A cluster routes by the bucket's name; a single server's call takes no route.
        let route = match self.conn.tells_nodes() {
            true => self.bucket_key(key),
            false => String::new(),
        };
        let mut packed = std::mem::take(&mut self.packed);
        let prefix = Arc::clone(&self.prefix);
        let lib = library(self.binary_values);
        let r = self.with_clock(&route, deadline, |c, now| {
            pack_fcall(&mut packed, &lib.name, &prefix, key, now, ask);
            fcall(c, lib, &packed)
        });
        self.packed = packed;
        let reply = match r {
            Ok(Some(r)) => r,
            Ok(None) => {
                self.functions = Functions::Off;
                return Ok(None);
            }
            Err(e) => {
                if matches!(e.kind(), ErrorKind::Unreachable | ErrorKind::Timeout) {
                    // Maybe another server now: ask again on the next call.
                    self.path = Path::Unknown;
                }
                return Err(e);
            }
        };
        let LeanReply {
            code,
            tokens,
            stamp,
            prev,
            now,
            flags,
        } = reply;
        let stored = Bucket {
            tokens,
            stamp,
            prev,
            kind: ask.policy.kind(),
        };
        let reason = if code == 0 { Reason::Ok } else { Reason::Rate };
        let verdict = verdict(stored, ask, reason, flags & 1 != 0, now);
        let lease = self.decided(&verdict, 0, flags, "", key, carry);
        Ok(Some(Acquired { verdict, lease }))
    }

    /// Decides with the Function or the scripts, never the native commands (tests comparing
    /// the paths; a server with the module then decides as a managed service would).
    pub fn without_module(mut self) -> Self {
        self.path = Path::Script;
        self
    }

    /// Whether this store's plain acquires go by the Function now (tests): asks the server
    /// with one plain decision's worth of nothing, by loading the library if it is missing.
    pub fn uses_functions(&mut self) -> Result<bool, StoreError> {
        if self.functions != Functions::Try {
            return Ok(false);
        }
        self.ensure_detected("")?;
        if self.path == Path::Module {
            return Ok(false);
        }
        let lib = library(self.binary_values);
        let r = self.conn.call(Route::Any, |c| {
            match redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(&lib.code)
                .query::<String>(c)
            {
                Ok(_) => {
                    prune(c, &lib.library);
                    Ok(true)
                }
                Err(e) if text(&e).contains("already exists") => Ok(true),
                Err(e) if e.code().is_some() => Ok(false),
                Err(e) => Err(e),
            }
        })?;
        if !r {
            self.functions = Functions::Off;
        }
        Ok(r)
    }
}

/// The verdict of a decision that left `b` at `now`: the numbers `acquire.lua` computes in the
/// script, computed here by the core from the same state and the same clock.
fn verdict(b: Bucket, ask: &Ask, reason: Reason, dry_run: bool, now: i64) -> Verdict {
    let p = &ask.policy;
    let retry_after_ms = if reason == Reason::Rate {
        b.wait_for(p, ask.cost * MILLI, now)
    } else {
        0
    };
    let dry_run = dry_run && reason != Reason::Ok;
    let mut v = Verdict {
        allowed: reason == Reason::Ok || dry_run,
        reason,
        remaining: 0,
        retry_after_ms,
        reset_after_ms: 0,
        next_token_ms: 0,
        dry_run,
        replay: false,
        source: Source::Store,
        // A plain call books nothing; `standing` tells what others booked ahead.
        wait_ms: 0,
        reserved: 0,
    };
    decision::standing(&mut v, &b, p, now);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// A plain acquire's FCALL packed from its numbers is, to the byte, the command the crate
    /// packs from the strings the Function takes (lean.lua: bucket; now, limit, per_ms, cost,
    /// then the dry-run flag and the policy's code, each left out when `0` and nothing follows).
    #[test]
    fn a_plain_acquire_is_packed_as_the_crate_packs_its_fcall() {
        let (key, policies) = (
            super::super::packing_fixtures::key(),
            super::super::packing_fixtures::policies(),
        );
        let mut packed = vec![b'x'; 7];
        for (prefix, now) in [("rl:", ""), ("", "1700000000123"), ("a:b:", "-5")] {
            for p in policies {
                for (cost, dry) in [(1, false), (3, true), (0, false), (u64::MAX, true)] {
                    let mut ask = Ask::new(p, cost, 0);
                    ask.dry_run = dry;
                    let bucket = format!("{prefix}{{{}}}b:{}", hex(&key.group), hex(&key.bucket));
                    let mut args = vec![p.limit().to_string(), p.per_ms().to_string()];
                    args.push(cost.to_string());
                    let code = p.kind().code();
                    if dry || code != 0 {
                        args.push(u8::from(dry).to_string());
                    }
                    if code != 0 {
                        args.push(code.to_string());
                    }
                    let expected = redis::cmd("FCALL")
                        .arg("rl_acquire_0123456789abcdef")
                        .arg(1)
                        .arg(&bucket)
                        .arg(now)
                        .arg(&args)
                        .get_packed_command();
                    let name = pack_fcall(
                        &mut packed,
                        "rl_acquire_0123456789abcdef",
                        prefix,
                        &key,
                        now,
                        &ask,
                    );
                    assert_eq!(
                        String::from_utf8_lossy(&packed),
                        String::from_utf8_lossy(&expected)
                    );
                    assert_eq!(&packed[name], bucket.as_bytes());
                }
            }
        }
    }

    fn reply(f: [&str; 6]) -> String {
        let mut out = String::from("*6\r\n");
        for n in f {
            out.push_str(&format!(":{n}\r\n"));
        }
        out
    }

    /// The usual reply read from its bytes is what the crate's reading of the same bytes makes
    /// of it; what it declines (another shape, an error, bytes that stop short) is left to that
    /// reading.
    #[test]
    fn the_functions_reply_read_from_its_bytes_is_what_its_value_gives() {
        use redis::FromRedisValue;
        let usual = reply(["0", "9000", "1700000000123", "0", "1700000000123", "0"]);
        let mut replies = vec![
            usual.clone(),
            reply(["1", "0", "-5", "7000", "-4", "5"]),
            reply(["255", "999999999999999999", "0", "0", "0", "255"]),
            "*6\r\n:0\r\n$1\r\n9\r\n:0\r\n:0\r\n:0\r\n:0\r\n".into(),
            "-ERR Function not found\r\n".into(),
            "*5\r\n:0\r\n:9\r\n:0\r\n:0\r\n:0\r\n".into(),
        ];
        replies.extend((1..usual.len()).map(|n| usual[..n].to_string()));
        let mut fast = 0;
        for text in &replies {
            let bytes = text.as_bytes();
            let Some((r, len)) = LeanReply::from_resp(bytes) else {
                continue;
            };
            fast += 1;
            assert_eq!(len, bytes.len(), "{text:?}");
            let v = redis::parse_redis_value(bytes).unwrap();
            assert_eq!(r, LeanReply::from_redis_value(v).unwrap(), "{text:?}");
            let mut two = bytes.to_vec();
            two.extend(b":1\r\n");
            assert_eq!(LeanReply::from_resp(&two).map(|(_, n)| n), Some(len));
        }
        assert_eq!(fast, 3);
    }

    /// A field out of its range is no reply, read either way: never a wrapped number (a reason
    /// of 256 read as 0 would admit).
    #[test]
    fn the_functions_reply_with_a_field_out_of_its_range_is_refused() {
        use redis::FromRedisValue;
        for f in [
            ["256", "9", "0", "0", "0", "0"],
            ["-1", "9", "0", "0", "0", "0"],
            ["0", "-9", "0", "0", "0", "0"],
            ["0", "9", "0", "-1", "0", "0"],
            ["1", "0", "0", "0", "0", "257"],
        ] {
            let bytes = reply(f);
            assert!(LeanReply::from_resp(bytes.as_bytes()).is_none(), "{f:?}");
            let v = redis::parse_redis_value(bytes.as_bytes()).unwrap();
            assert!(LeanReply::from_redis_value(v).is_err(), "{f:?}");
        }
    }

    #[test]
    fn the_library_names_its_version_and_registers_the_function_by_that_name() {
        for binary in [false, true] {
            let lib = library(binary);
            let version = lib.name.strip_prefix("rl_acquire_").unwrap();
            assert_eq!(version.len(), 16);
            assert!(lib
                .code
                .starts_with(&format!("#!lua name=ratelimit_{version}\n")));
            assert!(lib
                .code
                .contains(&format!("redis.register_function('{}'", lib.name)));
            assert!(!lib.code.contains("RL_FN_NAME"));
        }
    }

    /// A host writing new buckets in binary has a library of its own, one line apart from a
    /// text host's: the two never replace each other.
    #[test]
    fn a_binary_host_has_another_library_differing_by_the_new_buckets_form() {
        let (text, binary) = (library(false), library(true));
        assert_ne!(text.library, binary.library);
        assert!(text.code.contains("local NEW_BUCKETS_BINARY = false\n"));
        assert!(binary.code.contains("local NEW_BUCKETS_BINARY = true\n"));
        let plain = |l: &Library| l.code.replace(&l.name, "F").replace(&l.library, "L");
        let differing = plain(text)
            .lines()
            .zip(plain(binary).lines())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differing, 1);
    }
}
