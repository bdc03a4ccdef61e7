//! A bucket's stored value, exactly as the scripts read and write it (`format_bucket` and
//! `parse_bucket` of bucket.lua): one string, milli-tokens, stamp, full again at, last
//! decision, then its allowed, rate-denied and inflight-denied counts, in decimal, separated by
//! one space; a window (or any state with a previous window) adds its policy's code and the
//! previous window's milli-tokens, a token bucket keeps the 7 fields older builds read. Or the
//! same numbers in binary (`parse_binary` of bucket.lua): a mark byte, then each number as a
//! little-endian i64. A value is written in the form it was read in. Read and written with the
//! key API (no command round trip inside Redis): the decision's hot path is this GET and this
//! SET.

use ratelimit::core::bucket::{Bucket, Kind, Policy, MAX_BOOKED};
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
    /// Read in binary, and so written.
    pub binary: bool,
}

impl Stored {
    /// Whether the numbers are in the ranges ratelimit writes (bucket.lua's `in_range`): the
    /// stamp within MAX_BOOKED of zero (past it the scripts' arithmetic in doubles is no longer
    /// the core's), the other instants within MAX_STORED, milli-tokens, counts and previous
    /// window up to MAX_STORED. Past them a value is damaged, in either form.
    fn in_range(&self) -> bool {
        let m = MAX_STORED as u64;
        let b = &self.bucket;
        (-MAX_BOOKED..=MAX_BOOKED).contains(&b.stamp)
            && [self.full_at, self.used_at]
                .iter()
                .all(|x| (-MAX_STORED..=MAX_STORED).contains(x))
            && b.tokens <= m
            && b.prev <= m
            && self.counts.iter().all(|c| *c <= m)
    }

    /// What a decision at `now` leaves of `prior` (the value it read, if any): `bucket`, full
    /// again as `p` refills it, `counts`, in `prior`'s form.
    pub fn decided(
        bucket: Bucket,
        p: &Policy,
        counts: [u64; 3],
        prior: Option<&Stored>,
        now: i64,
    ) -> Self {
        Self {
            bucket,
            full_at: bucket.full_at(p),
            used_at: now,
            counts,
            binary: prior.is_some_and(|s| s.binary),
        }
    }
}

pub enum Read {
    Missing,
    Found(Stored),
    /// A value ratelimit did not write: never read as a full bucket.
    Damaged,
}

/// `^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)(.*)$` and, when something follows,
/// `^ ([0123]) (%d+)$`: the patterns of bucket.lua's `parse_bucket`, each number in its type's
/// range. Read in one pass, digits to numbers as they come (splitting first and parsing each
/// field as text was a sixth of a decision's time in the module, callgrind, issue 24).
pub fn parse(v: &[u8]) -> Option<Stored> {
    if v.first() == Some(&BINARY_MARK) {
        return parse_binary(v);
    }
    let mut r = Reader { v, at: 0 };
    let tokens = r.unsigned()?;
    let stamp = r.next()?.signed()?;
    let full_at = r.next()?.signed()?;
    let used_at = r.next()?.signed()?;
    let counts = [
        r.next()?.unsigned()?,
        r.next()?.unsigned()?,
        r.next()?.unsigned()?,
    ];
    let (mut kind, mut prev) = (Kind::TokenBucket, 0);
    if !r.done() {
        // One digit, 0 to 3 (Lua's `[0123]`), then the previous window's milli-tokens.
        kind = match r.next()?.byte()? {
            c @ b'0'..=b'3' => Kind::from_code(i64::from(c - b'0'))?,
            _ => return None,
        };
        prev = r.next()?.unsigned()?;
        if !r.done() {
            return None;
        }
    }
    Some(Stored {
        bucket: Bucket {
            tokens,
            stamp,
            prev,
            kind,
        },
        full_at,
        used_at,
        counts,
        binary: false,
    })
    .filter(Stored::in_range)
}

/// The first byte of a binary value (a text value's is a digit).
const BINARY_MARK: u8 = 1;

/// The largest magnitude of a stored number, in either form: each is exact in a Lua double.
const MAX_STORED: i64 = (1 << 53) - 1;

/// The mark, then 7 numbers (a token bucket) or 9 (a window's code and previous window after
/// them), each a little-endian i64, [`Stored::in_range`], the code 0 to 3: bucket.lua's
/// `parse_binary`.
fn parse_binary(v: &[u8]) -> Option<Stored> {
    let n = match v.len() {
        57 => 7,
        73 => 9,
        _ => return None,
    };
    let mut f = [0i64; 9];
    for (i, x) in f.iter_mut().take(n).enumerate() {
        let b: [u8; 8] = v[1 + 8 * i..9 + 8 * i].try_into().ok()?;
        *x = i64::from_le_bytes(b);
    }
    let count = |x: i64| u64::try_from(x).ok();
    let s = Stored {
        bucket: Bucket {
            tokens: count(f[0])?,
            stamp: f[1],
            prev: count(f[8])?,
            kind: Kind::from_code(f[7])?,
        },
        full_at: f[2],
        used_at: f[3],
        counts: [count(f[4])?, count(f[5])?, count(f[6])?],
        binary: true,
    };
    s.in_range().then_some(s)
}

/// A stored value's fields, one after another.
struct Reader<'a> {
    v: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at == self.v.len()
    }

    /// Past the one space between two fields.
    fn next(&mut self) -> Option<&mut Self> {
        (self.v.get(self.at) == Some(&b' ')).then(|| {
            self.at += 1;
            self
        })
    }

    /// One character making a whole field.
    fn byte(&mut self) -> Option<u8> {
        let c = *self.v.get(self.at)?;
        self.at += 1;
        matches!(self.v.get(self.at), None | Some(b' ')).then_some(c)
    }

    /// One or more digits up to the next space or the end, in range.
    fn unsigned(&mut self) -> Option<u64> {
        let rest = self.v.get(self.at..)?;
        let len = rest
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, after) = rest.split_at(len);
        if len == 0 || !matches!(after.first(), None | Some(b' ')) {
            return None;
        }
        let n = if len <= 19 {
            // Below 10^19: no overflow.
            digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
        } else {
            digits.iter().try_fold(0u64, |n, d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })?
        };
        self.at += len;
        Some(n)
    }

    /// [`Self::unsigned`] after an optional `-`, in an i64's range.
    fn signed(&mut self) -> Option<i64> {
        let negative = self.v.get(self.at) == Some(&b'-');
        self.at += usize::from(negative);
        let n = self.unsigned()?;
        if negative {
            // Down to i64::MIN, whose magnitude is one past i64::MAX.
            (n <= i64::MAX as u64 + 1).then(|| (n as i64).wrapping_neg())
        } else {
            i64::try_from(n).ok()
        }
    }
}

#[cfg(test)]
pub fn format(s: &Stored) -> String {
    String::from_utf8(format_bytes(s)).unwrap_or_default()
}

#[cfg(test)]
pub fn format_bytes(s: &Stored) -> Vec<u8> {
    let mut out = [0u8; MAX_LEN];
    let n = put(&mut out, s);
    out[..n].to_vec()
}

/// A binary value (`format_bucket` of bucket.lua): a count saturates at MAX_STORED; every other
/// number is written as it is (read back out of range, it is damaged, as in Lua).
fn put_binary(out: &mut [u8; MAX_LEN], s: &Stored) -> usize {
    let count = |c: u64| c.min(MAX_STORED as u64) as i64;
    let b = &s.bucket;
    let fields = [
        b.tokens as i64,
        b.stamp,
        s.full_at,
        s.used_at,
        count(s.counts[0]),
        count(s.counts[1]),
        count(s.counts[2]),
        i64::from(b.kind.code()),
        b.prev as i64,
    ];
    let n = if b.kind == Kind::TokenBucket && b.prev == 0 {
        7
    } else {
        9
    };
    out[0] = BINARY_MARK;
    for (i, f) in fields.iter().take(n).enumerate() {
        out[1 + 8 * i..9 + 8 * i].copy_from_slice(&f.to_le_bytes());
    }
    1 + 8 * n
}

/// The longest value: 9 numbers of at most 20 characters (a sign included), 8 spaces.
const MAX_LEN: usize = 9 * 20 + 8;

/// Writes the value at the start of `out`, and says how long it is (decimal by hand:
/// `format!` was a tenth of a decision's time; on the stack: no allocation).
fn put(out: &mut [u8; MAX_LEN], s: &Stored) -> usize {
    if s.binary {
        return put_binary(out, s);
    }
    let fields = [
        (false, s.bucket.tokens),
        (s.bucket.stamp < 0, s.bucket.stamp.unsigned_abs()),
        (s.full_at < 0, s.full_at.unsigned_abs()),
        (s.used_at < 0, s.used_at.unsigned_abs()),
        // A count saturates (no value holds one past MAX_STORED).
        (false, s.counts[0].min(MAX_STORED as u64)),
        (false, s.counts[1].min(MAX_STORED as u64)),
        (false, s.counts[2].min(MAX_STORED as u64)),
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
    let mut len = 0;
    for (i, (negative, mut v)) in fields.into_iter().take(n).enumerate() {
        if i > 0 {
            out[len] = b' ';
            len += 1;
        }
        if negative {
            out[len] = b'-';
            len += 1;
        }
        // Two digits at a time.
        let mut digits = [0u8; 20];
        let mut n = digits.len();
        while v >= 100 {
            let pair = 2 * (v % 100) as usize;
            v /= 100;
            n -= 2;
            digits[n..n + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if v >= 10 {
            let pair = 2 * v as usize;
            n -= 2;
            digits[n..n + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            n -= 1;
            digits[n] = b'0' + v as u8;
        }
        out[len..len + digits.len() - n].copy_from_slice(&digits[n..]);
        len += digits.len() - n;
    }
    len
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                            2021222324252627282930313233343536373839\
                            4041424344454647484950515253545556575859\
                            6061626364656667686970717273747576777879\
                            8081828384858687888990919293949596979899";

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
    let mut buf = [0u8; MAX_LEN];
    let len = put(&mut buf, s);
    let value = &buf[..len];
    // Within the module's bounds however it was computed (see `MAX_TTL_MS`).
    let ttl_ms = ttl_ms.clamp(1, super::MAX_TTL_MS);
    if !matches!(k.key_type(), KeyType::Empty | KeyType::String) {
        // A damaged bucket of another type is replaced, as SET replaces it (replicated as the
        // SET below, which replaces it on a replica too).
        k.delete()?;
    }
    // Written in place (a missing key is made a string by the access): no delete and insert
    // of the key, no new object, as SET would do.
    k.as_string_dma()?.write(value)?;
    k.set_expire(Duration::from_millis(ttl_ms as u64))?;
    drop(k);
    let at = super::server_ms().saturating_add(ttl_ms);
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

    /// Every number in decimal as `format!` writes it, at every length and both extremes.
    #[test]
    fn a_value_is_written_as_format_writes_it() {
        let mut unsigned = vec![0, 1, 9, 10, 99, 100, 101, u64::MAX, u64::MAX - 1];
        unsigned.extend((1..20).map(|e| 10u64.pow(e) - 1));
        unsigned.extend((1..20).map(|e| 10u64.pow(e)));
        for &u in &unsigned {
            for stamp in [
                i64::MIN,
                i64::MAX,
                -1,
                0,
                u as i64,
                (u as i64).wrapping_neg(),
            ] {
                let s = Stored {
                    bucket: Bucket {
                        tokens: u,
                        stamp,
                        prev: u,
                        kind: Kind::SlidingWindow,
                    },
                    full_at: stamp.wrapping_add(1),
                    used_at: stamp,
                    counts: [u, u / 7, 3],
                    binary: false,
                };
                // A count saturates at MAX_STORED.
                let m = MAX_STORED as u64;
                let expected = format!(
                    "{u} {stamp} {} {stamp} {} {} 3 2 {u}",
                    stamp.wrapping_add(1),
                    u.min(m),
                    (u / 7).min(m)
                );
                assert_eq!(format(&s), expected);
                // Read back when its numbers are in range; damaged past them.
                let back = Stored {
                    counts: [u.min(m), (u / 7).min(m), 3],
                    ..s
                };
                assert_eq!(
                    parse(expected.as_bytes()),
                    Some(back).filter(Stored::in_range)
                );
            }
        }
    }

    #[test]
    fn a_value_round_trips_through_its_text() {
        let s = Stored {
            bucket: Bucket::tokens_at(4_000, -5),
            full_at: 1_700_000_012_000,
            used_at: 1_700_000_000_000,
            counts: [1, 2, 3],
            binary: false,
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
            binary: false,
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

    /// The patterns as the first reading of this module had them: split on spaces, each field
    /// parsed as text (the reference the one-pass reading must equal).
    fn parse_by_split(v: &[u8]) -> Option<Stored> {
        let f: Vec<&[u8]> = v.split(|&b| b == b' ').collect();
        if f.len() != 7 && f.len() != 9 {
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
        if f.len() == 9 {
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
            binary: false,
        })
        .filter(Stored::in_range)
    }

    /// Values near every edge (numbers at and past their type's range, signs, spaces, short
    /// and long forms), and many more made from them by random edits: read alike.
    #[test]
    fn a_value_is_read_as_splitting_it_on_spaces_reads_it() {
        let seeds = [
            "4000 -5 1700000012000 1700000000000 1 2 3",
            "0 0 0 0 0 0 0",
            "18446744073709551615 9223372036854775807 -9223372036854775808 0 18446744073709551615 0 0",
            "18446744073709551616 0 0 0 0 0 0",
            "0 9223372036854775808 0 0 0 0 0",
            "0 -9223372036854775809 0 0 0 0 0",
            "0 -0 00 -007 0 0 0",
            "2000 1700000000000 1700000020000 1700000000500 4 5 6 2 3000",
            "0 10 20 10 1 0 0 3 18446744073709551615",
            "0 10 20 10 1 0 0 3 18446744073709551616",
            "1 2 3 4 5 6 7 4 0",
            "1 2 3 4 5 6 7 1",
            "1 2 3 4 5 6 7 1 2 3",
            "1 2 3 4 5 6 7 ",
            " 1 2 3 4 5 6 7",
            "1 2 3 4 5 6 -7",
            "1 2 3 4 5 6 7 - 1",
            "1 2 3 4 5 6 7 1 -1",
            "1 2 3 4 5 6 7 +1 1",
            "+1 2 3 4 5 6 7",
            "1 --2 3 4 5 6 7",
            "",
        ];
        let mut cases: Vec<Vec<u8>> = seeds.iter().map(|s| s.as_bytes().to_vec()).collect();
        // A fixed sequence (xorshift): the same cases on every run.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let alphabet = b"0123456789- +a";
        for _ in 0..20_000 {
            let mut v = seeds[rand(seeds.len())].as_bytes().to_vec();
            for _ in 0..1 + rand(3) {
                let c = alphabet[rand(alphabet.len())];
                match rand(3) {
                    0 if !v.is_empty() => {
                        let i = rand(v.len());
                        v[i] = c;
                    }
                    1 if !v.is_empty() => {
                        v.remove(rand(v.len()));
                    }
                    _ => v.insert(rand(v.len() + 1), c),
                }
            }
            cases.push(v);
        }
        let mut read = 0;
        for v in &cases {
            let expected = parse_by_split(v);
            assert_eq!(parse(v), expected, "{:?}", String::from_utf8_lossy(v));
            read += usize::from(expected.is_some());
        }
        // Both kinds of case: values read, and values refused.
        assert!(read > 1_000 && read < cases.len() - 1_000, "{read}");
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
            // Past the ranges ratelimit writes (`Stored::in_range`).
            "9007199254740992 2 3 4 5 6 7",
            "1 4503599627370497 3 4 5 6 7",
            "1 -4503599627370497 3 4 5 6 7",
            "1 2 9007199254740992 4 5 6 7",
            "1 2 3 -9007199254740992 5 6 7",
            "1 2 3 4 9007199254740992 6 7",
            "1 2 3 4 5 6 18446744073709551615",
            "1 2 3 4 5 6 7 2 9007199254740992",
        ] {
            assert_eq!(parse(v.as_bytes()), None, "{v:?}");
        }
        for v in [
            "9007199254740991 4503599627370496 9007199254740991 -9007199254740991 0 0 0",
            "0 -4503599627370496 0 0 9007199254740991 9007199254740991 9007199254740991 2 9007199254740991",
        ] {
            assert!(parse(v.as_bytes()).is_some(), "{v:?}");
        }
    }

    fn binary(fields: &[i64]) -> Vec<u8> {
        let mut v = vec![BINARY_MARK];
        for f in fields {
            v.extend(f.to_le_bytes());
        }
        v
    }

    #[test]
    fn a_binary_value_is_read_as_its_text_and_written_back_in_binary() {
        for text in [
            "4000 -5 1700000012000 1700000000000 1 2 3",
            "2000 1700000000000 1700000020000 1700000000500 4 5 6 2 3000",
            "0 10 20 10 1 0 0 3 7",
        ] {
            let fields: Vec<i64> = text.split(' ').map(|f| f.parse().unwrap()).collect();
            let b = binary(&fields);
            let read = parse(&b).unwrap();
            assert!(read.binary);
            assert_eq!(
                Stored {
                    binary: false,
                    ..read
                },
                parse(text.as_bytes()).unwrap()
            );
            assert_eq!(format_bytes(&read), b, "{text}");
        }
    }

    /// A window's two fields of zeros is a token bucket (as in text), written back in 7.
    #[test]
    fn a_binary_token_bucket_with_a_zero_window_is_written_in_seven_numbers() {
        let read = parse(&binary(&[1, 2, 3, 4, 5, 6, 7, 0, 0])).unwrap();
        assert_eq!(format_bytes(&read), binary(&[1, 2, 3, 4, 5, 6, 7]));
    }

    #[test]
    fn a_binary_count_saturates_at_the_largest_binary_number() {
        let mut s = parse(&binary(&[1, 2, 3, 4, MAX_STORED, 0, 0])).unwrap();
        s.counts[0] += 1;
        s.counts[2] = u64::MAX;
        assert_eq!(
            format_bytes(&s),
            binary(&[1, 2, 3, 4, MAX_STORED, 0, MAX_STORED])
        );
    }

    #[test]
    fn a_binary_value_out_of_its_ranges_or_length_is_damaged() {
        let ok = [
            0,
            -MAX_BOOKED,
            MAX_STORED,
            -MAX_STORED,
            MAX_STORED,
            0,
            0,
            3,
            MAX_STORED,
        ];
        assert!(parse(&binary(&ok)).is_some());
        for (i, bad) in [
            (0, -1),
            (1, -MAX_BOOKED - 1),
            (1, MAX_BOOKED + 1),
            (2, MAX_STORED + 1),
            (3, i64::MIN),
            (4, -1),
            (6, i64::MAX),
            (7, 4),
            (7, -1),
            (8, -1),
        ] {
            let mut f = ok;
            f[i] = bad;
            assert_eq!(parse(&binary(&f)), None, "field {i} = {bad}");
        }
        for len in [1, 56, 58, 72, 74] {
            let mut v = binary(&ok);
            v.resize(len, 0);
            assert_eq!(parse(&v), None, "{len} bytes");
        }
    }
}
