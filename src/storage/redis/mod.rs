//! The Redis backend: one limit for every host of a site, on a single Redis or a Redis Cluster.
//!
//! Each decision is one script, one round trip: the bucket arithmetic runs in Lua, exact (see
//! `lua/bucket.lua`), and equals `core::decision` on the shared decision vectors. The time is
//! the server's (`TIME` inside the script), so the hosts' clocks do not matter; a server that
//! refuses `TIME` in scripts is detected on the first call and decided with this host's clock.
//!
//! Keys hold pseudonyms only, in hex. Every key of a subject carries the same hash tag, the
//! subject's group pseudonym (made under the empty scope), so that its buckets of every scope,
//! their leases and its remembered requests share one Cluster slot:
//! `<prefix>{<group>}b:<bucket>` (the bucket), `…l:<bucket>` (its leases, by expiry),
//! `…q:<request>` (a remembered admission). Every write sets its expiry in the same script, so
//! idle state vanishes by itself. Counters are batched per process and added to
//! `<prefix>counters` at most once a second and at process end.

mod conn;
mod function;
mod link;
mod module;
mod resolve;
mod resp;

pub use conn::Target;
pub use module::path_name;

use crate::core::bucket::{Bucket, Kind, Policy, MAX_BOOKED};
use crate::core::counters::{Counters, Stats};
use crate::core::decision::{self, Ask, Reason, Source, Verdict};
use crate::core::keyswitch::{Fingerprint, KeyRecord, STAMP_NOW};
use crate::core::lease::{LeaseId, LeaseToken};
use crate::core::request::Judgement;
use crate::core::subject::BucketKey;
use crate::core::top::{self, BucketView};
use crate::opslog::{Event, OpsLog};
use crate::storage::{
    Acquired, AcquiredAll, Batching, Clock, ErrorKind, KeyRecords, Query, RefillEpoch, RefillWatch,
    Reply, Reports, Store, StoreError,
};
use conn::{Conn, Route};
use link::Link;
use module::{Command, Path};
use redis::Script;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How often a process adds its counts to the shared counters.
pub const FLUSH_MS: u64 = 1_000;

struct Scripts {
    acquire: Script,
    acquire_all: Script,
    peek: Script,
    release: Script,
    record_key: Script,
    add_counts: Script,
    add_denials: Script,
    refund: Script,
}

/// bucket.lua writing new buckets in the binary form (`ratelimit.redis_value_form = binary`) or
/// in text: one line apart, so that the two are other scripts and another Function library.
fn bucket_lua(binary: bool) -> String {
    const TEXT: &str = "local NEW_BUCKETS_BINARY = false\n";
    let lua = include_str!("lua/bucket.lua");
    debug_assert_eq!(lua.matches(TEXT).count(), 1);
    if binary {
        lua.replacen(TEXT, "local NEW_BUCKETS_BINARY = true\n", 1)
    } else {
        lua.to_string()
    }
}

/// The scripts of a host writing new buckets in text, or in binary.
fn scripts(binary: bool) -> &'static Scripts {
    static S: [OnceLock<Scripts>; 2] = [OnceLock::new(), OnceLock::new()];
    S[usize::from(binary)].get_or_init(|| {
        let bucket = bucket_lua(binary);
        let with_bucket = |body: &str| Script::new(&format!("{bucket}\n{body}"));
        let with_request = |body: &str| {
            let request = include_str!("lua/request.lua");
            Script::new(&format!("{bucket}\n{request}\n{body}"))
        };
        Scripts {
            acquire: with_request(include_str!("lua/acquire.lua")),
            acquire_all: with_request(include_str!("lua/acquire_all.lua")),
            peek: with_bucket(include_str!("lua/peek.lua")),
            release: with_bucket(include_str!("lua/release.lua")),
            record_key: Script::new(include_str!("lua/record_key.lua")),
            add_counts: Script::new(include_str!("lua/add_counts.lua")),
            add_denials: with_bucket(include_str!("lua/add_denials.lua")),
            refund: with_bucket(include_str!("lua/refund.lua")),
        }
    })
}

/// How a connection reads the time.
#[derive(Clone)]
enum Time {
    /// `TIME` inside each script.
    Server,
    /// This host's clock (a test's manual clock, or a server that refuses `TIME`).
    Host(Clock),
}

/// Connection settings of [`RedisStore::new`].
pub struct RedisSettings {
    pub target: Target,
    pub prefix: String,
    pub timeout_ms: u64,
    /// How often counts are added to the shared counters ([`FLUSH_MS`]; 0: at every step).
    pub flush_ms: u64,
}

pub struct RedisStore {
    conn: Conn,
    /// Shared, so that a call can hold it while the store is borrowed (`lean_acquire`).
    prefix: Arc<str>,
    time: Time,
    /// The clock that batches counts (this host's).
    clock: Clock,
    /// Counts not yet added to the shared counters, and when they last were.
    pending: Counters,
    flushed_at: i64,
    flush_ms: i64,
    log: Arc<OpsLog>,
    /// Native commands or scripts (see `module.rs`).
    path: Path,
    /// Whether a plain acquire on the scripts' path goes by the Function (see `function.rs`).
    functions: function::Functions,
    /// The last plain acquire's command (see `module.rs`): one buffer for every call.
    packed: Vec<u8>,
    /// New buckets in binary ([`Self::writing_binary_values`]).
    binary_values: bool,
}

/// Lowercase hex, into one string allocated once (this runs several times per decision).
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends `bytes` in lower-case hex, 32 at a time through a buffer on the stack (a `char`
/// pushed at a time was a tenth of a decision's client instructions, callgrind, issue 24).
fn push_hex(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.chunks(32) {
        let mut buf = [0u8; 64];
        hex_into(&mut buf, chunk);
        out.push_str(std::str::from_utf8(&buf[..2 * chunk.len()]).expect("hex digits are ASCII"));
    }
}

/// [`push_hex`] onto bytes (a packed command).
fn put_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for chunk in bytes.chunks(32) {
        let mut buf = [0u8; 64];
        hex_into(&mut buf, chunk);
        out.extend_from_slice(&buf[..2 * chunk.len()]);
    }
}

/// A bucket's name as one argument of a packed command: `tagged`'s name (prefix, the group in
/// braces, "b:", the bucket) written straight into `out`. Returns where the name lies in `out`.
fn bulk_bucket_name(out: &mut Vec<u8>, prefix: &str, key: &BucketKey) -> std::ops::Range<usize> {
    resp::bulk_head(
        out,
        prefix.len() + 2 + 2 * key.group.len() + 2 + 2 * key.bucket.len(),
    );
    let start = out.len();
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'{');
    put_hex(out, &key.group);
    out.extend_from_slice(b"}b:");
    put_hex(out, &key.bucket);
    let name = start..out.len();
    out.extend_from_slice(b"\r\n");
    name
}

/// `bytes` (at most 32) in lower-case hex at the start of `buf`.
fn hex_into(buf: &mut [u8; 64], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in buf.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
}

fn unhex16(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A stored bucket as `acquire.lua` writes it: milli-tokens, stamp, full again at, last
/// decision, allowed, rate-denied and inflight-denied counts; in either form (bucket.lua's
/// `format_bucket`: text, or binary), its numbers in range (`in_range`).
fn parse_bucket(v: &[u8]) -> Option<[i64; 7]> {
    if v.first() == Some(&BINARY_MARK) {
        return parse_binary(v);
    }
    let v = std::str::from_utf8(v).ok()?;
    // bucket.lua's patterns: `%d+` (digits only), `%-?%d+` for the three instants, `[0123]`
    // (red team: `str::parse` also took `+5`, `-0` as a count and `01` as a code).
    let digits = |f: &str| -> Option<i64> {
        (!f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
            .then(|| f.parse().ok())
            .flatten()
    };
    let signed = |f: &str| match f.strip_prefix('-') {
        Some(d) => digits(d).map(|n| -n),
        None => digits(f),
    };
    let mut out = [0i64; 7];
    let mut fields = v.split(' ');
    for (i, o) in out.iter_mut().enumerate() {
        let f = fields.next()?;
        *o = if (1..=3).contains(&i) {
            signed(f)?
        } else {
            digits(f)?
        };
    }
    // A window's policy code and previous window (see format_bucket), or nothing more.
    let prev = match (fields.next(), fields.next(), fields.next()) {
        (None, _, _) => 0,
        (Some(k @ ("0" | "1" | "2" | "3")), Some(p), None) => {
            Kind::from_code(digits(k)?)?;
            digits(p)?
        }
        _ => return None,
    };
    in_range(&out, prev).then_some(out)
}

/// The first byte of a binary value (never a digit: a text value starts with one).
const BINARY_MARK: u8 = 1;

/// The ranges ratelimit writes a stored bucket's numbers in (bucket.lua's `in_range`): the
/// stamp within MAX_BOOKED of zero, the other instants within 2^53 - 1, milli-tokens, counts
/// and previous window from 0 to 2^53 - 1.
fn in_range(f: &[i64; 7], prev: i64) -> bool {
    const MAX: i64 = (1 << 53) - 1;
    (-MAX_BOOKED..=MAX_BOOKED).contains(&f[1])
        && f.iter().all(|x| (-MAX..=MAX).contains(x))
        && [f[0], f[4], f[5], f[6], prev]
            .iter()
            .all(|x| (0..=MAX).contains(x))
}

/// A binary value (bucket.lua's `parse_binary`): the mark, then 7 or 9 little-endian i64,
/// `in_range`, the policy's code from 0 to 3.
fn parse_binary(v: &[u8]) -> Option<[i64; 7]> {
    let n = match v.len() {
        57 => 7,
        73 => 9,
        _ => return None,
    };
    let field = |i: usize| Some(i64::from_le_bytes(v[1 + 8 * i..9 + 8 * i].try_into().ok()?));
    let mut out = [0i64; 7];
    for (i, o) in out.iter_mut().enumerate() {
        *o = field(i)?;
    }
    let (kind, prev) = if n == 9 {
        (field(7)?, field(8)?)
    } else {
        (0, 0)
    };
    ((0..=3).contains(&kind) && in_range(&out, prev)).then_some(out)
}

/// The reply of `acquire_all.lua`: reported, flags, lease, expired, the combined verdict and
/// each limit's, six numbers a verdict.
type AcquireAllReply = (usize, u8, String, u64, Vec<u64>, Vec<u64>);

/// A verdict of a decision script: reason, remaining, retry_after, reset_after, next_token,
/// dry_run. A replay is made of its numbers (see `decision::as_replay`).
fn verdict_of(v: &[u64], replay: bool) -> Result<Verdict, StoreError> {
    let [code, remaining, retry_after_ms, reset_after_ms, next_token_ms, dry] = *v else {
        return Err(StoreError::new(
            ErrorKind::Io,
            "an unexpected reply of a decision script",
        ));
    };
    let reason = reason_of(code.min(3) as u8);
    let dry_run = dry != 0;
    let v = Verdict {
        allowed: reason == Reason::Ok || dry_run,
        reason,
        remaining,
        retry_after_ms,
        reset_after_ms,
        next_token_ms,
        dry_run,
        replay: false,
        source: Source::Store,
        wait_ms: 0,
        reserved: 0,
    };
    Ok(if replay { decision::as_replay(v) } else { v })
}

/// The reply of `acquire.lua` (and RL.ACQUIRE): reason, remaining, retry_after, reset_after,
/// next_token, flags, lease, expired, then wait and reserved. Those two are absent from a
/// server's module of a build before reservations (a rolling upgrade): read as 0.
struct AcquireReply {
    head: (u8, u64, u64, u64, u64, u8, String, u64),
    wait_ms: u64,
    reserved: u64,
}

/// A number of a reply: an integer in range as is, a string as the crate parses it. An integer
/// out of range, or a double, is no reply: the crate casts them (`as`), and a reason of 256
/// read as 0 admitted the call.
fn field<T: TryFrom<i64> + redis::FromRedisValue>(
    v: redis::Value,
) -> Result<T, redis::ParsingError> {
    match v {
        redis::Value::Int(i) => {
            T::try_from(i).map_err(|_| format!("a reply's field out of its range: {i}").into())
        }
        redis::Value::Double(d) => Err(format!("a reply's field is a double: {d}").into()),
        v => redis::from_redis_value(v),
    }
}

impl AcquireReply {
    /// The usual reply read straight from the start of `bytes`, and its length: ten fields,
    /// the lease empty, each number in its field's range (`field`'s fast case). None for
    /// anything else, or bytes that end before it does; what it declines is read as a `Value`
    /// by [`redis::FromRedisValue`], to the same result.
    fn from_resp(bytes: &[u8]) -> Option<(Self, usize)> {
        let mut b = bytes.strip_prefix(b"*10\r\n")?;
        let small = |v: i64| u8::try_from(v).ok();
        let count = |v: i64| u64::try_from(v).ok();
        let code = small(resp::integer(&mut b)?)?;
        let remaining = count(resp::integer(&mut b)?)?;
        let retry_after_ms = count(resp::integer(&mut b)?)?;
        let reset_after_ms = count(resp::integer(&mut b)?)?;
        let next_token_ms = count(resp::integer(&mut b)?)?;
        let flags = small(resp::integer(&mut b)?)?;
        resp::empty(&mut b)?;
        let expired = count(resp::integer(&mut b)?)?;
        let wait_ms = count(resp::integer(&mut b)?)?;
        let reserved = count(resp::integer(&mut b)?)?;
        let reply = Self {
            head: (
                code,
                remaining,
                retry_after_ms,
                reset_after_ms,
                next_token_ms,
                flags,
                String::new(),
                expired,
            ),
            wait_ms,
            reserved,
        };
        Some((reply, bytes.len() - b.len()))
    }
}

impl redis::FromRedisValue for AcquireReply {
    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        let redis::Value::Array(items) = v else {
            return Err("a decision's reply is not an array".into());
        };
        // The usual reply has 10 fields; a module of a build before reservations (a rolling
        // upgrade) sends the first 8 only: no wait, nothing owed. Fields are taken in place
        // (the crate's tuple conversion copied them twice).
        let long = match items.len() {
            10 => true,
            8 => false,
            _ => return Err("a decision's reply of an unexpected length".into()),
        };
        let mut it = items.into_iter();
        let mut f = || it.next().unwrap_or_default();
        let head = (
            field(f())?,
            field(f())?,
            field(f())?,
            field(f())?,
            field(f())?,
            field(f())?,
            redis::from_redis_value(f())?,
            field(f())?,
        );
        let (wait_ms, reserved) = if long {
            (field(f())?, field(f())?)
        } else {
            (0, 0)
        };
        Ok(Self {
            head,
            wait_ms,
            reserved,
        })
    }
}

impl RedisStore {
    /// A store that connects on its first call. `host_clock`: decide with this clock instead of
    /// the server's (tests drive time with it); `clock` batches the counts.
    pub fn new(
        settings: RedisSettings,
        host_clock: Option<Clock>,
        clock: Clock,
        log: Arc<OpsLog>,
    ) -> Self {
        Self {
            conn: Conn::new(
                settings.target,
                Duration::from_millis(settings.timeout_ms.max(1)),
            ),
            prefix: settings.prefix.into(),
            time: host_clock.map_or(Time::Server, Time::Host),
            flushed_at: clock(),
            flush_ms: settings.flush_ms.min(i64::MAX as u64) as i64,
            clock,
            pending: Counters::default(),
            log,
            path: Path::Unknown,
            functions: function::Functions::Try,
            packed: Vec::new(),
            binary_values: false,
        }
    }

    /// Decides also on a server that evicts keys (`ratelimit.redis_allow_eviction`): refused
    /// otherwise, since an evicted bucket is a silently reset limit.
    pub fn allowing_eviction(mut self) -> Self {
        self.conn.allow_eviction();
        self
    }

    /// Writes new buckets in the binary form (`ratelimit.redis_value_form = binary`) by the
    /// scripts and the Function; the module keeps writing them in text (both are read on every
    /// path, and each bucket is kept in the form it was found in).
    pub fn writing_binary_values(mut self) -> Self {
        self.binary_values = true;
        self
    }

    fn tagged(&self, key: &BucketKey, kind: &str, name: &[u8]) -> String {
        let mut k = String::with_capacity(self.prefix.len() + 40 + 2 * name.len());
        k.push_str(&self.prefix);
        k.push('{');
        push_hex(&mut k, &key.group);
        k.push('}');
        k.push_str(kind);
        k.push(':');
        push_hex(&mut k, name);
        k
    }

    fn bucket_key(&self, key: &BucketKey) -> String {
        self.tagged(key, "b", &key.bucket)
    }

    fn leases_key(&self, key: &BucketKey) -> String {
        self.tagged(key, "l", &key.bucket)
    }

    /// The remembered answer of `ask`'s request id (a name in the same slot, never touched,
    /// for a call without one: a script's keys are fixed in number).
    fn request_key(&self, key: &BucketKey, ask: &Ask) -> String {
        self.tagged(
            key,
            "q",
            ask.request.as_ref().map_or(&[][..], |r| &r.name[..]),
        )
    }

    fn global(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The `now` argument of a script: empty for the server's clock.
    fn now_arg(&self) -> String {
        match &self.time {
            Time::Server => String::new(),
            Time::Host(c) => c().to_string(),
        }
    }

    /// Runs one script invocation by `deadline`. A server that refuses `TIME` in scripts fails
    /// it before any write: this connection then decides with the host's clock from now on, said
    /// once in the log, and the call is made again (it did nothing).
    fn run<T: redis::FromRedisValue>(
        &mut self,
        key: &str,
        deadline: std::time::Instant,
        build: impl Fn(&str) -> redis::ScriptInvocation<'static>,
    ) -> Result<T, StoreError> {
        self.with_clock(key, deadline, |c, now| build(now).invoke(c))
    }

    /// `call` (a script or a Function, given the `now` argument) by `deadline`, with the
    /// handling of a server that refuses `TIME` in scripts that [`Self::run`] describes.
    fn with_clock<T>(
        &mut self,
        key: &str,
        deadline: std::time::Instant,
        mut call: impl FnMut(&mut Link, &str) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        let now = self.now_arg();
        let first = self
            .conn
            .call_by(deadline, Route::Key(key), |c| call(c, &now));
        match first {
            Err(e)
                if matches!(self.time, Time::Server)
                    && refused_in_script(&e)
                    && self.refuses_time(key) =>
            {
                self.log.note(Event::HostClock, &self.conn.describe());
                self.time = Time::Host(crate::storage::system_clock());
                let now = self.now_arg();
                self.conn.call(Route::Key(key), |c| call(c, &now))
            }
            other => other,
        }
    }

    /// Runs a script of the decision's by `deadline` (the decision's: see `module.rs`): its
    /// keys, then the time (see [`Self::now_arg`]), then its arguments.
    fn eval<T: redis::FromRedisValue>(
        &mut self,
        script: &'static Script,
        keys: &[String],
        args: &[impl AsRef<str>],
        deadline: std::time::Instant,
    ) -> Result<T, StoreError> {
        // A script's keys share one slot (see `tagged`): the first routes it.
        self.run(keys.first().map_or("", String::as_str), deadline, |now| {
            let mut inv = script.prepare_invoke();
            for k in keys {
                inv.key(k);
            }
            inv.arg(now);
            for a in args {
                inv.arg(a.as_ref());
            }
            inv
        })
    }

    /// Adds the pending counts to the shared counters when a second has passed (`force`: now).
    /// A flush that fails keeps them for the next one, unless it timed out: then they may have
    /// been added, and are dropped rather than counted twice.
    fn flush_pending(&mut self, force: bool) -> Result<(), StoreError> {
        let deadline = self.conn.budget();
        self.flush_by(force, deadline)
    }

    /// [`Self::flush_pending`] ending by `deadline`.
    fn flush_by(&mut self, force: bool, deadline: std::time::Instant) -> Result<(), StoreError> {
        let now = (self.clock)();
        if self.pending.is_zero() || (!force && now - self.flushed_at < self.flush_ms) {
            return Ok(());
        }
        let key = self.global("counters");
        let named = self.pending.named();
        let r = self.conn.call_by(deadline, Route::Key(&key), |c| {
            let mut inv = scripts(false).add_counts.prepare_invoke();
            inv.key(&key);
            for (name, n) in named.iter().filter(|(_, n)| *n > 0) {
                inv.arg(*name).arg(*n);
            }
            inv.invoke::<()>(c)
        });
        match r {
            Ok(()) => {
                self.pending = Counters::default();
                self.flushed_at = now;
                Ok(())
            }
            Err(e) => {
                if e.kind() == ErrorKind::Timeout {
                    self.pending = Counters::default();
                }
                self.flushed_at = now;
                Err(e)
            }
        }
    }

    /// Counts of a successful step, and the caller's `unwritten` ones, kept for the next flush.
    fn note(&mut self, counts: &Counters, carry: &mut Counters) {
        self.pending.add(counts);
        self.pending.add(&std::mem::take(carry));
        // Within what is left of the call that decided: a PHP call waits one budget, not two.
        // With less than half of it left (a slow call: a reconnect, a loaded server), the counts
        // wait for a later call: a flush cut short would drop its counts (they may have been
        // added) and the connection, and the next call would pay a reconnect in its turn.
        let Some(deadline) = self.conn.last_deadline() else {
            return;
        };
        if deadline
            .checked_duration_since(std::time::Instant::now())
            .is_some_and(|d| d >= self.conn.timeout() / 2)
        {
            let _ = self.flush_by(false, deadline);
        }
    }

    /// Counts a decision a script made (a replay as `retries`, leases it found expired, a clock
    /// seen going back) and names the lease it took, in `key`'s bucket.
    fn decided(
        &mut self,
        verdict: &Verdict,
        expired: u64,
        flags: u8,
        lease: &str,
        key: &BucketKey,
        carry: &mut Counters,
    ) -> Option<LeaseToken> {
        let mut counts = Counters::default();
        if verdict.replay {
            counts.retries += 1;
        } else {
            counts.record_verdict(verdict);
        }
        counts.leases_expired += expired;
        counts.clock_regressions += u64::from(flags & 4 != 0);
        self.note(&counts, carry);
        unhex16(lease).map(|id| LeaseToken {
            id: LeaseId(id),
            key: BucketKey {
                previous: None,
                ..*key
            },
        })
    }

    /// Every key matching `pattern`, on every master (SCAN: O(keys), for the operator's reads).
    fn scan_all(&mut self, pattern: &str) -> Result<Vec<String>, StoreError> {
        self.conn.scan(pattern)
    }

    /// The time leases are judged by, for a read outside a script.
    fn now_for_read(&mut self) -> Result<i64, StoreError> {
        match &self.time {
            Time::Host(c) => Ok(c()),
            Time::Server => {
                let (s, us): (i64, i64) = self
                    .conn
                    .call(Route::Any, |c| redis::cmd("TIME").query(c))?;
                Ok(s * 1000 + us / 1000)
            }
        }
    }
}

/// A read that met a value of another type at one of our names (damaged: not written by
/// ratelimit) as nothing there, for the operator's reads and the key record: a foreign value
/// must not make them fail.
fn damaged_is_none<T>(r: Result<T, StoreError>) -> Result<Option<T>, StoreError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::Corrupt => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a script failed because a command in it was refused: not allowed in scripts, not
/// deterministic (older servers), or unknown (renamed away, "Unknown Redis command called from
/// script", which names none). Which one is asked of the server ([`RedisStore::refuses_time`]).
fn refused_in_script(e: &StoreError) -> bool {
    let text = std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let t = text.to_ascii_lowercase();
    e.kind() == ErrorKind::Io
        && (t.contains("not allowed")
            || t.contains("deterministic")
            || t.contains("unknown command")
            || t.contains("unknown redis command"))
}

impl RedisStore {
    /// Whether the server refuses `TIME` in scripts (some managed services), asked with a
    /// script that does nothing else, on `key`'s server. One round trip, only after a script
    /// was refused a command.
    fn refuses_time(&mut self, key: &str) -> bool {
        let probe = self.conn.call(Route::Key(key), |c| {
            redis::cmd("EVAL")
                .arg("return redis.call('TIME')")
                .arg(0)
                .query::<redis::Value>(c)
        });
        probe.is_err_and(|e| refused_in_script(&e))
    }
}

fn reason_of(code: u8) -> Reason {
    match code {
        0 => Reason::Ok,
        1 => Reason::Rate,
        2 => Reason::Inflight,
        _ => Reason::InProgress,
    }
}

/// A request id's arguments of a decision script: request_ttl_ms ('0': none), the call's terms
/// (hex), replays.
fn request_args(ask: &Ask) -> [String; 3] {
    match &ask.request {
        Some(r) => [
            r.ttl_ms.max(1).to_string(),
            hex(&r.terms.0),
            r.replays.to_string(),
        ],
        None => ["0".into(), String::new(), "0".into()],
    }
}

impl RedisStore {
    /// RL.ACQUIRE, or acquire.lua, with every argument as a string (see `module::step`).
    fn acquire_step(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        deadline: std::time::Instant,
    ) -> Result<AcquireReply, StoreError> {
        let lease_id = super::lease_id_for(ask)?;
        let (keys, args) = self.acquire_args(key, ask, lease_ttl_ms, lease_id);
        self.step_by(
            Command::Acquire,
            &scripts(self.binary_values).acquire,
            &keys,
            &args,
            deadline,
        )
    }

    /// acquire.lua's keys and arguments after `now` (RL.ACQUIRE's full form).
    fn acquire_args(
        &self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        lease_id: Option<LeaseId>,
    ) -> ([String; 3], Vec<String>) {
        let keys = [
            self.bucket_key(key),
            self.leases_key(key),
            self.request_key(key, ask),
        ];
        let [request_ttl, terms, replays] = request_args(ask);
        let args = [
            ask.policy.limit().to_string(),
            ask.policy.per_ms().to_string(),
            ask.cost.to_string(),
            ask.max_inflight.to_string(),
            lease_ttl_ms.to_string(),
            lease_id.map(|l| hex(&l.0)).unwrap_or_default(),
            u8::from(ask.dry_run).to_string(),
            request_ttl,
            hex(&key.bucket),
            terms,
            replays,
            ask.policy.code_arg(),
        ];
        // A reservation's longest wait, a 13th argument (never the plain short form).
        let mut args = Vec::from(args);
        if let Some(max) = ask.max_wait_ms {
            args.push(match max {
                u64::MAX => "inf".to_string(),
                ms => ms.to_string(),
            });
        }
        (keys, args)
    }
}

impl Store for RedisStore {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        if let Some(lean) = self.lean_acquire(key, ask, carry)? {
            return Ok(lean);
        }
        // One budget for the whole call (see `step`).
        let deadline = self.conn.budget();
        let reply = match self.plain_native(key, ask, deadline)? {
            Some(reply) => reply,
            None => self.acquire_step(key, ask, lease_ttl_ms, deadline)?,
        };
        let (code, remaining, retry_after_ms, reset_after_ms, next_token_ms, flags, lease, expired) =
            reply.head;
        let fields = [
            u64::from(code),
            remaining,
            retry_after_ms,
            reset_after_ms,
            next_token_ms,
            u64::from(flags & 1),
        ];
        let mut verdict = verdict_of(&fields, flags & 2 != 0)?;
        verdict.wait_ms = reply.wait_ms;
        verdict.reserved = reply.reserved;
        let lease = self.decided(&verdict, expired, flags, &lease, key, carry);
        Ok(Acquired { verdict, lease })
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        let first = &asks[0];
        let lease_id = super::lease_id_for(first)?;
        // Every key carries its group's hash tag, and a subject's buckets share one group: one
        // script (one Cluster slot) decides them all.
        if keys.iter().any(|k| k.group != keys[0].group) {
            return Err(StoreError::new(
                ErrorKind::Misconfigured,
                "a compound call's buckets must belong to one subject",
            ));
        }
        let mut names: Vec<String> = keys.iter().map(|k| self.bucket_key(k)).collect();
        names.push(self.leases_key(&keys[0]));
        names.push(self.request_key(&keys[0], first));
        let [request_ttl, terms, replays] = request_args(first);
        let mut args = vec![
            keys.len().to_string(),
            lease_ttl_ms.to_string(),
            lease_id.map(|l| hex(&l.0)).unwrap_or_default(),
            request_ttl,
            hex(&keys[0].bucket),
            first.max_inflight.to_string(),
            terms,
            replays,
        ];
        for a in asks {
            args.push(a.policy.limit().to_string());
            args.push(a.policy.per_ms().to_string());
            args.push(a.cost.to_string());
            args.push(u8::from(a.dry_run).to_string());
            args.push(a.policy.code_arg());
        }
        let reply: AcquireAllReply = self.step(
            Command::AcquireAll,
            &scripts(self.binary_values).acquire_all,
            &names,
            &args,
        )?;
        let (reported, flags, lease, expired, combined, each) = reply;
        let each = each
            .chunks(6)
            .map(|v| verdict_of(v, false))
            .collect::<Result<Vec<_>, _>>()?;
        if each.len() != keys.len() {
            return Err(StoreError::new(
                ErrorKind::Io,
                "an unexpected reply of a decision script",
            ));
        }
        // A replay (flag 2) or a retry in progress for `expired` ms more (flag 8, by the
        // script's clock): the script sent each limit as it stands; the answer is made from
        // those, as every store makes it (times from the script's now, here 0).
        let judged = match flags & 10 {
            0 => Judgement::Fresh,
            2 => Judgement::Replay,
            _ => Judgement::InProgress {
                until: expired.min(i64::MAX as u64) as i64,
            },
        };
        if let Some((reported, verdict)) =
            crate::core::compound::remembered(&each, judged, 0, first.dry_run)
        {
            let _ = self.decided(&verdict, 0, flags, "", &keys[0], carry);
            return Ok(AcquiredAll {
                verdict,
                each,
                reported,
                lease: None,
            });
        }
        let verdict = verdict_of(&combined, false)?;
        let reported = reported.min(each.len() - 1);
        let lease = self.decided(&verdict, expired, flags, &lease, &keys[0], carry);
        Ok(AcquiredAll {
            verdict,
            each,
            reported,
            lease,
        })
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        _: &mut Counters,
    ) -> Result<Verdict, StoreError> {
        let bucket = self.bucket_key(key);
        let (tokens, stamp, now, kind, prev): (Option<u64>, Option<i64>, i64, i64, u64) = self
            .step(
                Command::Peek,
                &scripts(self.binary_values).peek,
                &[bucket],
                &[],
            )?;
        let kind = Kind::from_code(kind).unwrap_or_default();
        let stored = tokens.zip(stamp).map(|(tokens, stamp)| Bucket {
            tokens,
            stamp,
            prev,
            kind,
        });
        Ok(decision::peek(stored, policy, now))
    }

    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        let mut freed = 0;
        for t in leases {
            let zset = self.leases_key(&t.key);
            let id = hex(&t.id.0);
            let n: u64 = self.step(
                Command::Release,
                &scripts(self.binary_values).release,
                &[zset],
                &[id],
            )?;
            freed += n;
        }
        self.note(&Counters::default(), carry);
        Ok(freed)
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        let keys = [self.bucket_key(key), self.leases_key(key)];
        let n = self.forget(&keys)?;
        self.note(&Counters::default(), carry);
        Ok(n > 0)
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        super::answer(self, q, carry)
    }
}

/// `refund.lua`, or `RL.REFUND` where the server has it.
impl crate::storage::Refunds for RedisStore {
    fn refund(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        cost: u64,
        carry: &mut Counters,
    ) -> Result<bool, StoreError> {
        let bucket = self.bucket_key(key);
        let args = [
            policy.limit().to_string(),
            policy.per_ms().to_string(),
            cost.to_string(),
            policy.code_arg(),
        ];
        let flags: u8 = self.step(
            Command::Refund,
            &scripts(self.binary_values).refund,
            &[bucket],
            &args,
        )?;
        let mut counts = Counters::default();
        counts.clock_regressions += u64::from(flags & 4 != 0);
        self.note(&counts, carry);
        Ok(flags & 1 != 0)
    }
}

/// A cluster's master, as this worker last knew the slots.
impl crate::storage::Nodes for RedisStore {
    fn node_of(&mut self, key: &BucketKey) -> Option<String> {
        // A single server tells no nodes apart: no key to format on every decision.
        if !self.conn.tells_nodes() {
            return None;
        }
        let bucket = self.bucket_key(key);
        self.conn.node_of(&bucket)
    }
}

/// Not tracked: another process's reset is seen when a deny cache's remembered wait ends.
impl RefillWatch for RedisStore {
    fn refill_epoch(&mut self) -> RefillEpoch {
        RefillEpoch::Untracked
    }
}

impl Reports for RedisStore {
    fn stats(&mut self) -> Result<Stats, StoreError> {
        let _ = self.flush_pending(true);
        let key = self.global("counters");
        // `redis_path` of ratelimit_stats() is known once a connection asked.
        let _ = self.ensure_detected(&key);
        let stored: std::collections::HashMap<String, u64> =
            damaged_is_none(self.conn.call(Route::Key(&key), |c| {
                redis::cmd("HGETALL").arg(&key).query(c)
            }))?
            .unwrap_or_default();
        let mut counters = Counters::default();
        for (name, n) in &stored {
            if let Some(c) = counters.by_name(name) {
                *c = *n;
            }
        }
        counters.add(&self.pending);
        let prefix = self.prefix.clone();
        let buckets = self.scan_all(&format!("{prefix}{{*}}b:*"))?;
        let leases = self.scan_all(&format!("{prefix}{{*}}l:*"))?;
        let mut live = 0;
        if !leases.is_empty() {
            let after = format!("({}", self.now_for_read()?);
            for l in &leases {
                let n: Option<u64> = damaged_is_none(self.conn.call(Route::Key(l), |c| {
                    redis::cmd("ZCOUNT").arg(l).arg(&after).arg("+inf").query(c)
                }))?;
                live += n.unwrap_or(0);
            }
        }
        Ok(Stats {
            counters,
            entries: buckets.len() as u64,
            live_leases: live,
            breaker: None,
            partial: false,
        })
    }

    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError> {
        let prefix = self.prefix.clone();
        let buckets = self.scan_all(&format!("{prefix}{{*}}b:*"))?;
        let mut views = Vec::new();
        let after = format!("({}", self.now_for_read()?);
        for name in &buckets {
            let stored: Option<Vec<u8>> = damaged_is_none(
                self.conn
                    .call(Route::Key(name), |c| redis::cmd("GET").arg(name).query(c)),
            )?
            .flatten();
            let Some([t, s, f, u, a, d, i]) = stored.as_deref().and_then(parse_bucket) else {
                continue;
            };
            let Some(bucket) = name.rsplit(':').next().and_then(unhex16) else {
                continue;
            };
            let count = |v: i64| v.max(0) as u64;
            let (d, i) = (count(d), count(i));
            if d + i == 0 {
                continue;
            }
            let leases = name.replacen("}b:", "}l:", 1);
            let live: u64 = damaged_is_none(self.conn.call(Route::Key(&leases), |c| {
                redis::cmd("ZCOUNT")
                    .arg(&leases)
                    .arg(&after)
                    .arg("+inf")
                    .query(c)
            }))?
            .unwrap_or(0);
            views.push(BucketView {
                bucket,
                tokens_milli: count(t),
                stamp_ms: s,
                full_at_ms: f,
                used_at_ms: u,
                allowed: count(a),
                denied_rate: d,
                denied_inflight: i,
                live_leases: live,
            });
        }
        top::order(&mut views);
        views.truncate(n);
        Ok(views)
    }
}

impl Batching for RedisStore {
    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        let scripts = scripts(self.binary_values);
        for (key, n) in denials {
            let bucket = self.bucket_key(key);
            let n = n.to_string();
            self.conn.call(Route::Key(&bucket), |c| {
                scripts.add_denials.key(&bucket).arg(&n).invoke::<()>(c)
            })?;
        }
        Ok(())
    }

    fn tick(&mut self) {
        let _ = self.flush_pending(false);
    }

    /// Writes what is pending with the carried counts; when the server cannot take them, they
    /// all go back to the carry, for another store (the local fallback) to write.
    fn flush(&mut self, carry: &mut Counters) -> Result<(), StoreError> {
        self.pending.add(&std::mem::take(carry));
        let r = self.flush_pending(true);
        if r.is_err() {
            carry.add(&std::mem::take(&mut self.pending));
        }
        r
    }
}

impl KeyRecords for RedisStore {
    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        let key = self.global("keyring");
        // Read as text and parsed here: a hash another writer damaged (a fingerprint that is
        // not one, a time that is not a number) is none recorded, or an unknown time, never a
        // failed call (which would count toward the breaker).
        type Fields = (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        // A value of another type there is none recorded too (recording replaces it).
        let read = damaged_is_none(self.conn.call(Route::Key(&key), |c| {
            redis::cmd("HMGET")
                .arg(&key)
                .arg(&["f", "p", "h", "v", "s"])
                .query(c)
        }));
        let Some((f, p, h, v, s)): Option<Fields> = read? else {
            return Ok(None);
        };
        // An older build's record has only f and p: its host and time are unknown.
        Ok(f.and_then(|f| unhex16(&f)).map(|fingerprint| KeyRecord {
            fingerprint,
            path: p.unwrap_or_default(),
            host: h.unwrap_or_default(),
            previous: v.and_then(|v| unhex16(&v)),
            since_ms: s.and_then(|s| s.parse().ok()).unwrap_or(0),
        }))
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        let key = self.global("keyring");
        let expected = expected.map(|f| hex(f)).unwrap_or_default();
        let previous = new.previous.as_ref().map(|f| hex(f)).unwrap_or_default();
        let (fp, path, host) = (hex(&new.fingerprint), new.path.clone(), new.host.clone());
        let since = new.since_ms;
        // Through `run`: a server that refuses TIME in scripts makes it stamp the host's time.
        let deadline = self.conn.budget();
        let n: Result<u64, StoreError> = self.run(&key.clone(), deadline, move |now| {
            let since = match since {
                STAMP_NOW if now.is_empty() => "now".to_string(),
                STAMP_NOW => now.to_string(),
                s => s.to_string(),
            };
            let mut inv = scripts(false).record_key.prepare_invoke();
            inv.key(&key)
                .arg(&expected)
                .arg(&fp)
                .arg(&path)
                .arg(&host)
                .arg(&previous)
                .arg(since);
            inv
        });
        Ok(n? == 1)
    }
}

impl Drop for RedisStore {
    /// Adds what is still pending (a process ending normally loses no count); best effort.
    fn drop(&mut self) {
        let _ = self.flush_pending(true);
    }
}

/// What the packing tests of the hot path (`module.rs`, `function.rs`) pack: a bucket, and a
/// policy of every kind the Function decides (a stepped bucket is the module's alone).
#[cfg(test)]
mod packing_fixtures {
    use crate::core::bucket::{Kind, Policy};
    use crate::core::subject::BucketKey;

    pub fn key() -> BucketKey {
        BucketKey {
            bucket: [0xa5; 16],
            group: std::array::from_fn(|i| i as u8 * 17),
            previous: None,
        }
    }

    pub fn policies() -> [Policy; 4] {
        [
            Policy::new(10, 60_000).unwrap(),
            Policy::new(1_000_000_000, 1).unwrap(),
            Policy::new(7, 1_000).unwrap().with_kind(Kind::FixedWindow),
            Policy::new(7, 1_000)
                .unwrap()
                .with_kind(Kind::SlidingWindow),
        ]
    }
}

#[cfg(test)]
mod reply_tests {
    use super::AcquireReply;
    use redis::{FromRedisValue, Value};

    fn reply(fields: &[i64], lease: &[u8]) -> Value {
        let mut v: Vec<Value> = fields.iter().map(|&i| Value::Int(i)).collect();
        v.insert(6, Value::BulkString(lease.to_vec()));
        Value::Array(v)
    }

    #[test]
    fn a_decision_reply_of_ten_fields_is_read_field_by_field() {
        let r = AcquireReply::from_redis_value(reply(&[1, 9, 2, 3, 4, 5, 7, 8, 6], b"ab")).unwrap();
        assert_eq!(r.head, (1, 9, 2, 3, 4, 5, "ab".to_string(), 7));
        assert_eq!((r.wait_ms, r.reserved), (8, 6));
    }

    /// A module of a build before reservations answers 8 fields: wait and reserved are 0.
    #[test]
    fn a_decision_reply_of_eight_fields_has_no_booking() {
        let r = AcquireReply::from_redis_value(reply(&[0, 9, 0, 3, 4, 1, 0], b"")).unwrap();
        assert_eq!(r.head, (0, 9, 0, 3, 4, 1, String::new(), 0));
        assert_eq!((r.wait_ms, r.reserved), (0, 0));
    }

    /// Out of its range, a field is no reply (the crate's `as` made a reason of 256 an
    /// admission); a number as a string is the crate's parse of it.
    #[test]
    fn a_field_out_of_range_is_no_reply_and_a_string_is_parsed() {
        for fields in [
            [256, 9, 2, 3, 4, 5, 7],
            [0, -1, 2, 3, 4, 5, 7],
            [-3, 9, 2, 3, 4, 300, 7],
        ] {
            let mut ten = fields.to_vec();
            ten.extend([0, 0]);
            assert!(
                AcquireReply::from_redis_value(reply(&ten, b"")).is_err(),
                "{fields:?}"
            );
            assert!(
                AcquireReply::from_redis_value(reply(&fields, b"")).is_err(),
                "{fields:?}"
            );
        }
        let mut v = reply(&[0, 9, 2, 3, 4, 5, 7, 8, 6], b"");
        if let Value::Array(items) = &mut v {
            items[1] = Value::BulkString(b"12".to_vec());
        }
        assert_eq!(AcquireReply::from_redis_value(v).unwrap().head.1, 12);
    }
}

#[cfg(test)]
mod stored_tests {
    use super::parse_bucket;

    /// A binary value as bucket.lua's `format_bucket` packs it.
    fn binary(fields: &[i64]) -> Vec<u8> {
        let mut v = vec![1u8];
        for f in fields {
            v.extend(f.to_le_bytes());
        }
        v
    }

    #[test]
    fn a_value_is_read_alike_in_either_form() {
        assert_eq!(parse_bucket(b"0 -0 -0 -0 0 0 0 0 0"), Some([0; 7]));
        let fields = [999_000, -5, 6_000, 7, 12, 3, 4];
        assert_eq!(parse_bucket(b"999000 -5 6000 7 12 3 4"), Some(fields));
        assert_eq!(parse_bucket(&binary(&fields)), Some(fields));
        let mut window = fields.to_vec();
        window.extend([2, 500]);
        assert_eq!(parse_bucket(b"999000 -5 6000 7 12 3 4 2 500"), Some(fields));
        assert_eq!(parse_bucket(&binary(&window)), Some(fields));
    }

    #[test]
    fn a_text_value_out_of_its_ranges_is_none() {
        for v in [
            "9007199254740992 2 3 4 5 6 7",
            "1 4503599627370497 3 4 5 6 7",
            "1 2 -9007199254740992 4 5 6 7",
            "1 2 3 4 5 6 99999999999999999999",
            "1 2 3 4 5 6 7 2 9007199254740992",
            "1 2 3 4 5 6 7 9 0",
            // Not bucket.lua's patterns (red team 3).
            "+5000 1 1 1 1 1 0",
            "-0 1 1 1 1 1 0",
            "5000 1 1 1 +1 1 0",
            "5000 1 1 1 1 -0 1",
            "5000 1 1 1 1 1 0 01 5",
            "5000 1 1 1 1 1 0 1 +5",
            "5000 +1 1 1 1 1 0",
            "5000 1 1 1 1 1 0 1 -0",
        ] {
            assert_eq!(parse_bucket(v.as_bytes()), None, "{v}");
        }
    }

    #[test]
    fn a_binary_value_out_of_its_ranges_or_length_is_none() {
        let max = (1i64 << 53) - 1;
        let booked = crate::core::bucket::MAX_BOOKED;
        let ok = [0, -booked, max, -max, max, 0, 0, 3, max];
        assert!(parse_bucket(&binary(&ok)).is_some());
        for (i, bad) in [
            (0, -1),
            (1, -booked - 1),
            (1, booked + 1),
            (2, max + 1),
            (3, -max - 1),
            (4, -1),
            (6, max + 1),
            (7, 4),
            (7, -1),
            (8, -1),
        ] {
            let mut f = ok;
            f[i] = bad;
            assert_eq!(parse_bucket(&binary(&f)), None, "field {i} = {bad}");
        }
        let whole = binary(&ok);
        for len in [0, 1, 56, 58, 72, 74] {
            let mut v = whole.clone();
            v.resize(len, 0);
            if len > 0 {
                v[0] = 1;
            }
            assert_eq!(parse_bucket(&v), None, "{len} bytes");
        }
    }
}
