//! A bucket's stored value, exactly as the scripts read and write it (`format_bucket` and
//! `parse_bucket` of bucket.lua): one string, milli-tokens, stamp, full again at, last
//! decision, then its allowed, rate-denied and inflight-denied counts, in decimal, separated by
//! one space; a window (or any state with a previous window) adds its policy's code and the
//! previous window's milli-tokens, a token bucket keeps the 7 fields older builds read. Read and
//! written with the key API (no command round trip inside Redis): the decision's hot path is
//! this GET and this SET.

use ratelimit::core::bucket::{Bucket, Kind};
use redis_module::key::RedisKeyWritable;
use redis_module::raw::KeyType;
use redis_module::{Context, RedisError, RedisString};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub bucket: Bucket,
    pub full_at: i64,
    pub used_at: i64,
    /// Allowed, rate-denied, inflight-denied.
    pub counts: [u64; 3],
}

pub enum Read {
    Missing,
    Found(Stored),
    /// A value ratelimit did not write: never read as a full bucket.
    Damaged,
}

/// `^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)(.*)$` and, when something follows,
/// `^ ([0123]) (%d+)$`: the patterns of bucket.lua's `parse_bucket`.
pub fn parse(v: &[u8]) -> Option<Stored> {
    // The fields in place (no allocation on a decision's path).
    let mut f: [&[u8]; 9] = [&[]; 9];
    let mut n = 0;
    for part in v.split(|&b| b == b' ') {
        *f.get_mut(n)? = part;
        n += 1;
    }
    if n != 7 && n != 9 {
        return None;
    }
    let digits = |x: &[u8]| !x.is_empty() && x.iter().all(u8::is_ascii_digit);
    let unsigned = |x: &[u8]| {
        digits(x)
            .then(|| std::str::from_utf8(x).ok()?.parse::<u64>().ok())
            .flatten()
    };
    let signed = |x: &[u8]| {
        let d = x.strip_prefix(b"-").unwrap_or(x);
        digits(d)
            .then(|| std::str::from_utf8(x).ok()?.parse::<i64>().ok())
            .flatten()
    };
    let (mut kind, mut prev) = (Kind::TokenBucket, 0);
    if n == 9 {
        // One digit, 0 to 3 (Lua's `[0123]`), then the previous window's milli-tokens.
        kind = match f[7] {
            [c @ b'0'..=b'3'] => Kind::from_code(i64::from(c - b'0'))?,
            _ => return None,
        };
        prev = unsigned(f[8])?;
    }
    Some(Stored {
        bucket: Bucket {
            tokens: unsigned(f[0])?,
            stamp: signed(f[1])?,
            prev,
            kind,
        },
        full_at: signed(f[2])?,
        used_at: signed(f[3])?,
        counts: [unsigned(f[4])?, unsigned(f[5])?, unsigned(f[6])?],
    })
}

#[cfg(test)]
pub fn format(s: &Stored) -> String {
    let mut out = Vec::with_capacity(MAX_LEN);
    put(&mut out, s);
    String::from_utf8(out).unwrap_or_default()
}

/// The longest value: 9 numbers of at most 20 characters, 8 spaces.
const MAX_LEN: usize = 9 * 20 + 8;

/// Writes the value into `out` (decimal by hand: `format!` was a tenth of a decision's time).
fn put(out: &mut Vec<u8>, s: &Stored) {
    let fields = [
        (false, s.bucket.tokens),
        (s.bucket.stamp < 0, s.bucket.stamp.unsigned_abs()),
        (s.full_at < 0, s.full_at.unsigned_abs()),
        (s.used_at < 0, s.used_at.unsigned_abs()),
        (false, s.counts[0]),
        (false, s.counts[1]),
        (false, s.counts[2]),
        // A window's policy and previous window (format_bucket: only when not a plain token
        // bucket).
        (false, u64::from(s.bucket.kind.code())),
        (false, s.bucket.prev),
    ];
    let n = if s.bucket.kind == Kind::TokenBucket && s.bucket.prev == 0 {
        7
    } else {
        9
    };
    for (i, (negative, mut v)) in fields.into_iter().take(n).enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if negative {
            out.push(b'-');
        }
        let mut digits = [0u8; 20];
        let mut n = digits.len();
        loop {
            n -= 1;
            digits[n] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        out.extend_from_slice(&digits[n..]);
    }
}

/// `GET` of the bucket; a value of another type there is damaged (`get_bucket` of bucket.lua).
pub fn read(ctx: &Context, key: &RedisString) -> Result<Read, RedisError> {
    let k = ctx.open_key(key);
    match k.key_type() {
        KeyType::Empty => Ok(Read::Missing),
        KeyType::String => match k.read()? {
            None => Ok(Read::Missing),
            Some(v) => Ok(parse(v).map_or(Read::Damaged, Read::Found)),
        },
        _ => Ok(Read::Damaged),
    }
}

/// A bucket's key opened once for a decision that reads it and then writes it (the hot path:
/// one lookup instead of two).
pub struct Opened<'a> {
    key: &'a RedisString,
    k: RedisKeyWritable,
}

impl<'a> Opened<'a> {
    pub fn new(ctx: &Context, key: &'a RedisString) -> Self {
        Self {
            key,
            k: ctx.open_key_writable(key),
        }
    }

    /// As [`read`].
    pub fn read(&self) -> Result<Read, RedisError> {
        match self.k.key_type() {
            KeyType::Empty => Ok(Read::Missing),
            KeyType::String => {
                Ok(parse(&self.k.as_string_dma()?).map_or(Read::Damaged, Read::Found))
            }
            // Another tenant's hash, list, set... at our name: damaged, as `get_bucket` says.
            _ => Ok(Read::Damaged),
        }
    }

    /// As [`write`].
    pub fn write(self, ctx: &Context, s: &Stored, ttl_ms: i64) -> Result<(), RedisError> {
        write_open(ctx, self.key, self.k, s, ttl_ms)
    }
}

/// `SET key value PX ttl_ms`, replicated as `SET key value PXAT when` (what Redis 7 replicates
/// for a script's `SET .. PX`), so that a replica or an AOF expires it when the primary does.
pub fn write(ctx: &Context, key: &RedisString, s: &Stored, ttl_ms: i64) -> Result<(), RedisError> {
    write_open(ctx, key, ctx.open_key_writable(key), s, ttl_ms)
}

fn write_open(
    ctx: &Context,
    key: &RedisString,
    k: RedisKeyWritable,
    s: &Stored,
    ttl_ms: i64,
) -> Result<(), RedisError> {
    let mut value = Vec::with_capacity(MAX_LEN);
    put(&mut value, s);
    let ttl_ms = ttl_ms.max(1);
    if !matches!(k.key_type(), KeyType::Empty | KeyType::String) {
        // A damaged bucket of another type is replaced, as SET replaces it (replicated as the
        // SET below, which replaces it on a replica too).
        k.delete()?;
    }
    // Written in place (a missing key is made a string by the access): no delete and insert
    // of the key, no new object, as SET would do.
    k.as_string_dma()?.write(&value)?;
    k.set_expire(Duration::from_millis(ttl_ms as u64))?;
    drop(k);
    let at = super::server_ms() + ttl_ms;
    // SAFETY: RedisModule_Replicate is filled in by RedisModule_Init before any command runs
    // and is called on the command's thread with its context. The format "sbcl" names exactly
    // the four arguments that follow, each alive for the call: a RedisModuleString (the key
    // the command received, held by `key`), a buffer and its length (`value`, not changed
    // during the call), a NUL-terminated C string, and a long long. Redis copies what it
    // keeps. (Called directly: the crate's wrapper makes a Redis string of every argument
    // first, about half of this call's cost, on every decision.)
    let replicated = unsafe {
        redis_module::raw::RedisModule_Replicate.map(|f| {
            f(
                ctx.get_raw(),
                c"SET".as_ptr(),
                c"sbcl".as_ptr(),
                key.inner,
                value.as_ptr().cast::<std::ffi::c_char>(),
                value.len(),
                c"PXAT".as_ptr(),
                at as std::ffi::c_longlong,
            )
        })
    };
    match replicated {
        Some(0) => Ok(()),
        _ => Err(RedisError::Str(
            "ERR ratelimit: the bucket's write was not replicated",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips_through_its_text() {
        let s = Stored {
            bucket: Bucket::tokens_at(4_000, -5),
            full_at: 1_700_000_012_000,
            used_at: 1_700_000_000_000,
            counts: [1, 2, 3],
        };
        assert_eq!(format(&s), "4000 -5 1700000012000 1700000000000 1 2 3");
        assert_eq!(parse(format(&s).as_bytes()), Some(s));
    }

    #[test]
    fn a_window_keeps_its_policy_and_previous_window_in_two_more_fields() {
        let s = Stored {
            bucket: Bucket {
                tokens: 2_000,
                stamp: 1_700_000_000_000,
                prev: 3_000,
                kind: Kind::SlidingWindow,
            },
            full_at: 1_700_000_020_000,
            used_at: 1_700_000_000_500,
            counts: [4, 5, 6],
        };
        assert_eq!(
            format(&s),
            "2000 1700000000000 1700000020000 1700000000500 4 5 6 2 3000"
        );
        assert_eq!(parse(format(&s).as_bytes()), Some(s));
        let fixed = "0 10 20 10 1 0 0 1 0";
        assert_eq!(
            parse(fixed.as_bytes()).map(|s| s.bucket.kind),
            Some(Kind::FixedWindow)
        );
        assert_eq!(format(&parse(fixed.as_bytes()).unwrap()), fixed);
    }

    #[test]
    fn what_the_scripts_would_call_damaged_is_refused() {
        for v in [
            "",
            "1 2 3 4 5 6",
            "1 2 3 4 5 6 7 8",
            "1 2 3 4 5 6 7 4 0",
            "1 2 3 4 5 6 7 1",
            "1 2 3 4 5 6 7 1 -1",
            "1 2 3 4 5 6 7 1 2 3",
            "1 2 3 4 5 6 7 01 2",
            "-1 2 3 4 5 6 7",
            "1 2 3 4 -5 6 7",
            "1  2 3 4 5 6 7",
            "1 2 3 4 5 6 7 ",
            "a 2 3 4 5 6 7",
            "1 - 3 4 5 6 7",
        ] {
            assert_eq!(parse(v.as_bytes()), None, "{v:?}");
        }
    }
}
