//! A bucket's stored value, exactly as the scripts read and write it (`format_bucket` and
//! `parse_bucket` of bucket.lua): one string, milli-tokens, stamp, full again at, last
//! decision, then its allowed, rate-denied and inflight-denied counts, in decimal, separated by
//! one space. Read and written with the key API (no command round trip inside Redis): the
//! decision's hot path is this GET and this SET.
//!
//! A new kind of policy (issue 23's windows) with a value of its own is one more variant here.

use ratelimit::core::bucket::Bucket;
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

/// `^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)$`, the pattern of bucket.lua.
pub fn parse(v: &[u8]) -> Option<Stored> {
    let mut f = v.split(|&b| b == b' ');
    let mut field = |signed: bool| -> Option<&[u8]> {
        let x = f.next()?;
        let digits = match x {
            [b'-', rest @ ..] if signed => rest,
            _ => x,
        };
        (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then_some(x)
    };
    let unsigned = |x: &[u8]| std::str::from_utf8(x).ok()?.parse::<u64>().ok();
    let signed = |x: &[u8]| std::str::from_utf8(x).ok()?.parse::<i64>().ok();
    let tokens = unsigned(field(false)?)?;
    let stamp = signed(field(true)?)?;
    let full_at = signed(field(true)?)?;
    let used_at = signed(field(true)?)?;
    let counts = [
        unsigned(field(false)?)?,
        unsigned(field(false)?)?,
        unsigned(field(false)?)?,
    ];
    if f.next().is_some() {
        return None;
    }
    Some(Stored {
        bucket: Bucket { tokens, stamp },
        full_at,
        used_at,
        counts,
    })
}

pub fn format(s: &Stored) -> String {
    format!(
        "{} {} {} {} {} {} {}",
        s.bucket.tokens,
        s.bucket.stamp,
        s.full_at,
        s.used_at,
        s.counts[0],
        s.counts[1],
        s.counts[2]
    )
}

/// `GET` of the bucket (an error for a key of another type, as GET's WRONGTYPE).
pub fn read(ctx: &Context, key: &RedisString) -> Result<Read, RedisError> {
    let k = ctx.open_key(key);
    match k.read()? {
        None => Ok(Read::Missing),
        Some(v) => Ok(parse(v).map_or(Read::Damaged, Read::Found)),
    }
}

/// `SET key value PX ttl_ms`, replicated as `SET key value PXAT when` (what Redis 7 replicates
/// for a script's `SET .. PX`), so that a replica or an AOF expires it when the primary does.
pub fn write(ctx: &Context, key: &RedisString, s: &Stored, ttl_ms: i64) -> Result<(), RedisError> {
    let value = format(s);
    let ttl_ms = ttl_ms.max(1);
    let k = ctx.open_key_writable(key);
    k.write(&value)?;
    k.set_expire(Duration::from_millis(ttl_ms as u64))?;
    let at = (super::server_ms() + ttl_ms).to_string();
    ctx.replicate(
        "SET",
        &[key.as_slice(), value.as_bytes(), b"PXAT", at.as_bytes()],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips_through_its_text() {
        let s = Stored {
            bucket: Bucket {
                tokens: 4_000,
                stamp: -5,
            },
            full_at: 1_700_000_012_000,
            used_at: 1_700_000_000_000,
            counts: [1, 2, 3],
        };
        assert_eq!(format(&s), "4000 -5 1700000012000 1700000000000 1 2 3");
        assert_eq!(parse(format(&s).as_bytes()), Some(s));
    }

    #[test]
    fn what_the_scripts_would_call_damaged_is_refused() {
        for v in [
            "",
            "1 2 3 4 5 6",
            "1 2 3 4 5 6 7 8",
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
