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
use super::module::Path;
use super::RedisStore;
use crate::core::bucket::{Bucket, MILLI};
use crate::core::counters::Counters;
use crate::core::decision::{self, Ask, Reason, Source, Verdict};
use crate::core::subject::BucketKey;
use crate::storage::{Acquired, ErrorKind, StoreError};
use redis::{ConnectionLike, RedisError};
use std::sync::OnceLock;
use std::time::Instant;

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

fn library() -> &'static Library {
    static L: OnceLock<Library> = OnceLock::new();
    L.get_or_init(|| {
        let body = format!(
            "{}\n{}",
            include_str!("lua/bucket.lua"),
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

/// The function's reply: reason, milli-tokens, stamp, previous window, now, flags.
type LeanReply = (u8, u64, i64, u64, i64, u8);

fn text(e: &RedisError) -> String {
    e.to_string().to_ascii_lowercase()
}

/// FCALL of the library's function; `None` when the server has no Functions for us.
fn fcall(
    c: &mut dyn ConnectionLike,
    key: &str,
    now: &str,
    args: &[String],
) -> Result<Option<LeanReply>, RedisError> {
    let lib = library();
    let call = |c: &mut dyn ConnectionLike| {
        redis::cmd("FCALL")
            .arg(&lib.name)
            .arg(1)
            .arg(key)
            .arg(now)
            .arg(args)
            .query::<LeanReply>(c)
    };
    match call(c) {
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
            call(c).map(Some)
        }
        Err(e) if no_functions(&e) => Ok(None),
        r => r.map(Some),
    }
}

/// How many libraries of other builds a load leaves on the server. Every build loads its own
/// (see the module's doc), so without a bound a server kept for years collects one per
/// deploy. Two builds side by side (a rolling upgrade) never delete each other's: the bound is
/// passed only once older builds' libraries pile up, and a build still running whose library
/// was deleted loads it again on its next call (one more round trip, once).
const KEEP_OTHERS: usize = 3;

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
        let bucket = self.bucket_key(key);
        let deadline = self.conn.budget();
        let p = &ask.policy;
        let mut args = vec![
            p.limit().to_string(),
            p.per_ms().to_string(),
            ask.cost.to_string(),
        ];
        let code = p.kind().code();
        if ask.dry_run || code != 0 {
            args.push(u8::from(ask.dry_run).to_string());
        }
        if code != 0 {
            args.push(code.to_string());
        }
        let reply = match self.fcall_by(&bucket, &args, deadline) {
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
        let (code, tokens, stamp, prev, now, flags) = reply;
        let stored = Bucket {
            tokens,
            stamp,
            prev,
            kind: p.kind(),
        };
        let reason = if code == 0 { Reason::Ok } else { Reason::Rate };
        let verdict = verdict(stored, ask, reason, flags & 1 != 0, now);
        let lease = self.decided(&verdict, 0, flags, "", key, carry);
        Ok(Some(Acquired { verdict, lease }))
    }

    /// The FCALL by `deadline`, with `run`'s handling of a server that refuses `TIME` in
    /// scripts (the host's clock from then on).
    fn fcall_by(
        &mut self,
        key: &str,
        args: &[String],
        deadline: Instant,
    ) -> Result<Option<LeanReply>, StoreError> {
        self.with_clock(key, deadline, |c, now| fcall(c, key, now, args))
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
        let lib = library();
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

    #[test]
    fn the_library_names_its_version_and_registers_the_function_by_that_name() {
        let lib = library();
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
