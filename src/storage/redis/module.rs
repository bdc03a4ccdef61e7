//! The native commands of `redis-module/` (`libratelimit_redis.so`, issue 24), used when the
//! server has them, else the scripts. Each command takes what `EVALSHA` of its script takes
//! after the SHA and answers exactly as the script does (same keys, stored values, reply and
//! clock), so the reply is read by the same code, and hosts with and without the module share
//! every bucket.
//!
//! Detection: the first decision of a connection asks `COMMAND INFO` for the five commands on
//! the server that will run it, within that decision's budget (one deadline for the question
//! and the decision, as for every call). A decision that meets a lost connection or a timeout detects
//! again on its next call (a server restarted with or without `--loadmodule`, a rolling upgrade);
//! a command a server turns out not to know (a Cluster node not yet upgraded) did nothing, and
//! the call is made again with the script.

use super::conn::Route;
use super::{resp, RedisStore};
use crate::core::bucket::Kind;
use crate::core::decision::Ask;
use crate::core::subject::BucketKey;
use crate::storage::{ErrorKind, StoreError};
use redis::Script;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// The native commands, by the script each one stands for.
#[derive(Clone, Copy)]
pub(super) enum Command {
    Acquire,
    AcquireAll,
    Peek,
    Release,
    Reset,
    /// Not asked for by detection (a module of a build before refunds has the others): a
    /// server that turns out not to know it answers through the script.
    Refund,
}

impl Command {
    const ALL: [Command; 5] = [
        Command::Acquire,
        Command::AcquireAll,
        Command::Peek,
        Command::Release,
        Command::Reset,
    ];

    fn name(self) -> &'static str {
        match self {
            Command::Acquire => "RL.ACQUIRE",
            Command::AcquireAll => "RL.ACQUIRE_ALL",
            Command::Peek => "RL.PEEK",
            Command::Release => "RL.RELEASE",
            Command::Reset => "RL.RESET",
            Command::Refund => "RL.REFUND",
        }
    }
}

/// How this store's decisions reach the server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Path {
    /// Not known yet: the next decision asks.
    Unknown,
    Module,
    Script,
}

/// What the last detection of this process found, for `ratelimit_stats()`'s `redis_path`
/// (0: none yet, 1: module, 2: script).
static LAST: AtomicU8 = AtomicU8::new(0);

/// `ratelimit_stats()`'s `redis_path`: "module" once a connection of this process found the
/// native commands (and none found them missing since), else "script".
pub fn path_name() -> &'static str {
    match LAST.load(Ordering::Relaxed) {
        1 => "module",
        _ => "script",
    }
}

fn note(path: Path) {
    LAST.store(if path == Path::Module { 1 } else { 2 }, Ordering::Relaxed);
}

/// Whether a call failed because the server does not know the command (no module loaded).
fn unknown_command(e: &StoreError) -> bool {
    let text = std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default()
        .to_ascii_lowercase();
    e.kind() == ErrorKind::Io && text.contains("unknown command")
}

/// A fault after which the server may not be the one detected (reconnected, restarted).
fn may_have_changed(e: &StoreError) -> bool {
    matches!(e.kind(), ErrorKind::Unreachable | ErrorKind::Timeout)
}

/// The arguments of a plain acquire (no slot, no request id: `max_inflight` and
/// `request_ttl_ms` 0) in the short form `RL.ACQUIRE` and acquire.lua both take: the bucket
/// alone, then limit, period and cost, then the dry-run flag and the policy's code, each left
/// out when it is `0` and nothing follows it. Every other call in full.
/// Borrowed: the arguments are not copied.
fn short_form<'a>(
    command: Command,
    keys: &'a [String],
    args: &'a [String],
) -> (&'a [String], Vec<&'a str>) {
    // acquire.lua's arguments after `now`: limit, per_ms, cost, max_inflight, lease_ttl_ms,
    // lease, dry_run, request_ttl_ms, bucket name, terms, replays, policy.
    match (command, keys, args) {
        (
            Command::Acquire,
            [bucket, ..],
            [limit, per, cost, inflight, _, _, dry, request, _, _, _, policy],
        ) if inflight == "0" && request == "0" => {
            let mut short = vec![limit.as_str(), per, cost];
            if dry == "1" || policy != "0" {
                short.push(dry);
            }
            if policy != "0" {
                short.push(policy);
            }
            (std::slice::from_ref(bucket), short)
        }
        _ => (keys, args.iter().map(String::as_str).collect()),
    }
}

/// Writes into `out` the native command of a step (see [`RedisStore::step`]):
/// `NAME numkeys keys.. now args..` in [`short_form`].
fn pack_command(out: &mut Vec<u8>, command: Command, keys: &[String], now: &str, args: &[String]) {
    let (keys, args) = short_form(command, keys, args);
    let numkeys = keys.len().to_string();
    resp::pack(
        out,
        3 + keys.len() + args.len(),
        [command.name().as_bytes(), numkeys.as_bytes()]
            .into_iter()
            .chain(keys.iter().map(|k| k.as_bytes()))
            .chain([now.as_bytes()])
            .chain(args.iter().map(|a| a.as_bytes())),
    );
}

/// Writes into `out` (cleared first) the command [`short_form`] makes of a plain acquire, as
/// `resp::pack` writes it (tested to the byte): `RL.ACQUIRE 1 bucket now limit per_ms cost
/// [dry_run [policy]]`, each number written from its value (`now`: the host's clock, None for
/// the server's, an empty argument). Returns where the bucket's name lies in `out`.
fn pack_plain(
    out: &mut Vec<u8>,
    prefix: &str,
    key: &BucketKey,
    now: Option<i64>,
    ask: &Ask,
) -> Range<usize> {
    let p = &ask.policy;
    // The policy's code is "0" for a token bucket only (`Policy::code_arg`).
    let policy = p.kind().code() != 0;
    let dry = ask.dry_run || policy;
    out.clear();
    // 7 to 9 arguments, the first two always the same.
    out.extend_from_slice(b"*7\r\n$10\r\nRL.ACQUIRE\r\n$1\r\n1\r\n");
    out[1] += u8::from(dry) + u8::from(policy);
    debug_assert_eq!(Command::Acquire.name(), "RL.ACQUIRE");
    let name = super::bulk_bucket_name(out, prefix, key);
    match now {
        None => out.extend_from_slice(b"$0\r\n\r\n"),
        Some(t) => resp::bulk_number(out, t < 0, t.unsigned_abs()),
    }
    resp::bulk_number(out, false, p.limit());
    resp::bulk_number(out, false, p.per_ms());
    resp::bulk_number(out, false, ask.cost);
    if dry {
        resp::bulk_number(out, false, u64::from(ask.dry_run));
    }
    if policy {
        let code = u64::from(p.kind().code());
        match p.kind() {
            Kind::SteppedBucket => {
                // "3:<amount>"
                let mut text = Vec::with_capacity(24);
                text.extend_from_slice(b"3:");
                resp::decimal(&mut text, p.amount());
                resp::bulk(out, &text);
            }
            _ => resp::bulk_number(out, false, code),
        }
    }
    name
}

impl RedisStore {
    /// Asks the server that serves `key` whether it has every native command; an ACL that
    /// forbids asking counts as no.
    fn detect(&mut self, key: &str, deadline: Instant) -> Result<Path, StoreError> {
        let names: Vec<&str> = Command::ALL.iter().map(|c| c.name()).collect();
        let found: Result<Vec<redis::Value>, StoreError> =
            self.conn.call_by(deadline, Route::Key(key), |c| {
                redis::cmd("COMMAND").arg("INFO").arg(&names).query(c)
            });
        let path = match found {
            Ok(v) if v.len() == names.len() && !v.contains(&redis::Value::Nil) => Path::Module,
            Ok(_) => Path::Script,
            Err(e) if e.kind() == ErrorKind::Misconfigured => Path::Script,
            Err(e) => return Err(e),
        };
        note(path);
        Ok(path)
    }

    /// Detects now, if not done yet, whether the server has the commands.
    pub(super) fn ensure_detected(&mut self, key: &str) -> Result<(), StoreError> {
        let deadline = self.conn.budget();
        self.detected_by(key, deadline)
    }

    /// [`Self::ensure_detected`] by `deadline`.
    fn detected_by(&mut self, key: &str, deadline: Instant) -> Result<(), StoreError> {
        if self.path == Path::Unknown {
            self.path = self.detect(key, deadline)?;
            // Maybe another server (a reconnect): Functions are asked for again.
            if self.functions == super::function::Functions::Off {
                self.functions = super::function::Functions::Try;
            }
        }
        Ok(())
    }

    /// One decision step: the native `command` where the server has it, else `script`, with
    /// the same keys, time and arguments (see [`RedisStore::eval`]).
    pub(super) fn step<T: redis::FromRedisValue>(
        &mut self,
        command: Command,
        script: &'static Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, StoreError> {
        // One budget for the whole call: the question (first call of a connection), the
        // command, and the script after a command the server turned out not to know.
        let deadline = self.conn.budget();
        self.step_by(command, script, keys, args, deadline)
    }

    /// [`Self::step`] by `deadline`.
    pub(super) fn step_by<T: redis::FromRedisValue>(
        &mut self,
        command: Command,
        script: &'static Script,
        keys: &[String],
        args: &[String],
        deadline: Instant,
    ) -> Result<T, StoreError> {
        let key = keys.first().map_or("", String::as_str);
        self.detected_by(key, deadline)?;
        if self.path == Path::Module {
            let mut packed = Vec::with_capacity(256);
            pack_command(&mut packed, command, keys, &self.now_arg(), args);
            let r = self.conn.call_by(deadline, Route::Key(key), |c| {
                super::resp::query(c, &packed)
            });
            match r {
                Err(e) if unknown_command(&e) => {
                    self.path = Path::Script;
                    note(Path::Script);
                }
                Err(e) => {
                    if may_have_changed(&e) {
                        self.path = Path::Unknown;
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
        let (keys, args) = short_form(command, keys, args);
        let r = self.eval(script, keys, &args, deadline);
        if matches!(&r, Err(e) if may_have_changed(e)) {
            self.path = Path::Unknown;
        }
        r
    }

    /// A plain acquire (no slot, no request id, no reservation: the common call) by RL.ACQUIRE's
    /// short form, packed straight from its numbers into the store's buffer and its reply read
    /// straight from its bytes (see `AcquireReply::from_resp`): the same command and the same
    /// result as [`Self::step`] of the strings, without making them. None when the call is not
    /// one, or the server not known to have the commands (then `step` asks, and decides), or
    /// when it turns out not to know them (then the script decides, by the same `deadline`).
    pub(super) fn plain_native(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        deadline: Instant,
    ) -> Result<Option<super::AcquireReply>, StoreError> {
        if self.path != Path::Module
            || ask.max_inflight > 0
            || ask.request.is_some()
            || ask.max_wait_ms.is_some()
        {
            return Ok(None);
        }
        let now = match &self.time {
            super::Time::Server => None,
            super::Time::Host(c) => Some(c()),
        };
        let name = pack_plain(&mut self.packed, &self.prefix, key, now, ask);
        let packed = &self.packed;
        // The bucket's name routes a cluster's call (a single server's take no route). It is
        // text: the prefix (a string) and hex.
        let route = match self.conn.tells_nodes() {
            true => std::str::from_utf8(&packed[name]).unwrap_or_default(),
            false => "",
        };
        let r = self.conn.call_by(deadline, Route::Key(route), |c| {
            match c.request_with(packed, super::AcquireReply::from_resp)? {
                Ok(reply) => Ok(reply),
                // An error reply is the call's error, anything else read as the crate reads it
                // (`resp::query`).
                Err(v) => Ok(redis::from_redis_value(v.extract_error()?)?),
            }
        });
        match r {
            Ok(reply) => Ok(Some(reply)),
            Err(e) if unknown_command(&e) => {
                self.path = Path::Script;
                note(Path::Script);
                Ok(None)
            }
            Err(e) => {
                if may_have_changed(&e) {
                    self.path = Path::Unknown;
                }
                Err(e)
            }
        }
    }

    /// `RL.RESET` where the server has it, else `DEL` of the same keys.
    pub(super) fn forget(&mut self, keys: &[String]) -> Result<u64, StoreError> {
        let key = keys.first().map_or("", String::as_str);
        let deadline = self.conn.budget();
        self.detected_by(key, deadline)?;
        let native = self.path == Path::Module;
        let r = self.conn.call_by(deadline, Route::Key(key), |c| {
            if native {
                redis::cmd(Command::Reset.name())
                    .arg(keys.len())
                    .arg(keys)
                    .query(c)
            } else {
                redis::cmd("DEL").arg(keys).query(c)
            }
        });
        match r {
            Err(e) if native && unknown_command(&e) => {
                self.path = Path::Script;
                note(Path::Script);
                self.conn.call_by(deadline, Route::Key(key), |c| {
                    redis::cmd("DEL").arg(keys).query(c)
                })
            }
            Err(e) => {
                if may_have_changed(&e) {
                    self.path = Path::Unknown;
                }
                Err(e)
            }
            ok => ok,
        }
    }

    /// Which path this store's decisions take now (tests).
    pub fn uses_module(&mut self) -> Result<bool, StoreError> {
        self.ensure_detected("")?;
        Ok(self.path == Path::Module)
    }

    /// Decides with the EVALSHA scripts only, neither the native commands nor the Function
    /// (tests comparing the paths).
    pub fn scripts_only(mut self) -> Self {
        self.path = Path::Script;
        self.functions = super::function::Functions::Never;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::super::{RedisSettings, RedisStore, Target};
    use crate::core::bucket::Policy;
    use crate::core::counters::Counters;
    use crate::core::decision::Ask;
    use crate::core::subject::BucketKey;
    use crate::opslog::OpsLog;
    use crate::storage::{system_clock, ErrorKind, Store};
    use std::io::{BufRead, BufReader, Write};
    use std::time::{Duration, Instant};

    /// A fault injector, not a Redis: a server with the native commands that answers `COMMAND`
    /// and `RL.*` each `delay` late (anything else, the eviction check, at once).
    fn slow_module_server(delay: Duration) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    let mut r = BufReader::new(s);
                    let mut line = String::new();
                    // One command: *N, then N times $len and the argument.
                    while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                        let n: usize = line.trim()[1..].parse().unwrap_or(0);
                        let mut args = Vec::new();
                        for _ in 0..n {
                            line.clear();
                            let _ = r.read_line(&mut line);
                            line.clear();
                            let _ = r.read_line(&mut line);
                            args.push(line.trim().to_ascii_uppercase());
                        }
                        line.clear();
                        let reply: &[u8] = match args.first().map(String::as_str) {
                            Some("COMMAND") => b"*5\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n",
                            Some("RL.ACQUIRE") => {
                                b"*8\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n"
                            }
                            _ => b"$39\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n\r\n",
                        };
                        if args
                            .first()
                            .is_some_and(|a| a == "COMMAND" || a == "RL.ACQUIRE")
                        {
                            std::thread::sleep(delay);
                        }
                        if w.write_all(reply).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        port
    }

    fn store(prefix: &str, host_clock: Option<i64>) -> RedisStore {
        let settings = RedisSettings {
            target: Target::parse("redis://127.0.0.1:1/0", &[]).unwrap(),
            prefix: prefix.into(),
            timeout_ms: 500,
            flush_ms: 0,
        };
        let clock = host_clock.map(|t| -> crate::storage::Clock { std::sync::Arc::new(move || t) });
        RedisStore::new(settings, clock, system_clock(), OpsLog::none())
    }

    /// A plain acquire packed from its numbers is, to the byte, the command the general path
    /// packs from its strings, for every policy, dry run or not, on either clock.
    #[test]
    fn a_plain_acquire_is_packed_as_the_general_path_packs_it() {
        use super::super::resp;
        use super::{pack_command, pack_plain, Command};
        use crate::core::bucket::Kind;
        let key = super::super::packing_fixtures::key();
        let stepped = Policy::new(100, 60_000)
            .unwrap()
            .with_kind(Kind::SteppedBucket)
            .with_amount(25)
            .unwrap();
        let policies: Vec<Policy> = super::super::packing_fixtures::policies()
            .into_iter()
            .chain([stepped])
            .collect();
        let mut packed = vec![b'x'; 7];
        for (prefix, now) in [
            ("rl:", None),
            ("", Some(1_700_000_000_123)),
            ("a:b:", Some(-5)),
        ] {
            let s = store(prefix, now);
            for &p in &policies {
                for (cost, dry) in [(1, false), (3, true), (0, false), (u64::MAX, true)] {
                    let mut ask = Ask::new(p, cost, 0);
                    ask.dry_run = dry;
                    let (keys, args) = s.acquire_args(&key, &ask, 30_000, None);
                    let mut expected = Vec::new();
                    pack_command(&mut expected, Command::Acquire, &keys, &s.now_arg(), &args);
                    let name = pack_plain(&mut packed, prefix, &key, now, &ask);
                    assert_eq!(
                        String::from_utf8_lossy(&packed),
                        String::from_utf8_lossy(&expected)
                    );
                    assert_eq!(&packed[name], keys[0].as_bytes());
                    // The short form indeed (one key).
                    assert!(expected.starts_with(b"*"));
                    let mut one = Vec::new();
                    resp::bulk(&mut one, b"1");
                    assert!(packed.windows(one.len()).any(|w| w == one));
                }
            }
        }
    }

    /// The usual reply read from its bytes is what the crate's reading of the same bytes makes
    /// of it; what it declines (another shape, a lease, a number out of its field's range, an
    /// error, bytes that stop short) is left to that reading.
    #[test]
    fn a_decision_reply_read_from_its_bytes_is_what_its_value_gives() {
        use super::super::AcquireReply;
        use redis::FromRedisValue;
        let ten = |f: [&str; 9], lease: &str| {
            let mut out = String::from("*10\r\n");
            for (i, n) in f.iter().enumerate() {
                if i == 6 {
                    out.push_str(&format!("${}\r\n{lease}\r\n", lease.len()));
                }
                out.push_str(&format!(":{n}\r\n"));
            }
            out
        };
        let usual = ten(["0", "9000", "0", "6000", "6000", "4", "0", "0", "0"], "");
        let mut replies = vec![
            usual.clone(),
            ten(
                ["1", "0", "1500", "60000", "1500", "1", "2", "700", "12"],
                "",
            ),
            ten(
                [
                    "255",
                    "999999999999999999",
                    "0",
                    "0",
                    "0",
                    "0",
                    "0",
                    "0",
                    "0",
                ],
                "",
            ),
            ten(["256", "9", "0", "0", "0", "0", "0", "0", "0"], ""),
            ten(["0", "-1", "0", "0", "0", "0", "0", "0", "0"], ""),
            ten(["0", "9", "0", "0", "0", "0", "0", "0", "-3"], ""),
            ten(
                [
                    "0",
                    "9",
                    "0",
                    "0",
                    "0",
                    "0",
                    "0",
                    "0",
                    "1000000000000000000",
                ],
                "",
            ),
            ten(
                ["0", "9", "0", "0", "0", "0", "0", "0", "0"],
                "0123456789abcdef0123456789abcdef",
            ),
            "*8\r\n:0\r\n:9\r\n:0\r\n:3\r\n:4\r\n:1\r\n$0\r\n\r\n:0\r\n".into(),
            "-ERR unknown command 'RL.ACQUIRE'\r\n".into(),
            "*10\r\n:0\r\n$1\r\n9\r\n:0\r\n:0\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n".into(),
        ];
        // Cut anywhere: none is read before it is whole.
        replies.extend((1..usual.len()).map(|n| usual[..n].to_string()));
        let mut fast = 0;
        for text in &replies {
            let bytes = text.as_bytes();
            let Some((r, len)) = AcquireReply::from_resp(bytes) else {
                continue;
            };
            fast += 1;
            assert_eq!(len, bytes.len(), "{text:?}");
            let v = redis::parse_redis_value(bytes).unwrap();
            let slow = AcquireReply::from_redis_value(v).unwrap();
            assert_eq!(
                (r.head, r.wait_ms, r.reserved),
                (slow.head, slow.wait_ms, slow.reserved),
                "{text:?}"
            );
            // What follows the reply is the next one's.
            let mut two = bytes.to_vec();
            two.extend(b":1\r\n");
            assert_eq!(AcquireReply::from_resp(&two).map(|(_, n)| n), Some(len));
        }
        // The three usual ones (the largest numbers in range among them), whole.
        assert_eq!(fast, 3);
    }

    /// A reply field out of its range is no reply (red team): the crate converts an integer to
    /// a u8 with `as`, so a reason of 256 or -256 read as 0 (admitted), a flags field of 257 as
    /// 1 (a shadow scope's denial: admitted), and a remaining of -9 as 2^64 - 9.
    #[test]
    fn a_decision_reply_with_a_field_out_of_its_range_is_refused() {
        use super::super::AcquireReply;
        use redis::FromRedisValue;
        let reply = |f: [&str; 9]| {
            let mut out = String::from("*10\r\n");
            for (i, n) in f.iter().enumerate() {
                if i == 6 {
                    out.push_str("$0\r\n\r\n");
                }
                out.push_str(&format!(":{n}\r\n"));
            }
            out
        };
        for f in [
            ["256", "9", "0", "0", "0", "0", "0", "0", "0"],
            ["-256", "9", "0", "0", "0", "0", "0", "0", "0"],
            ["1", "0", "100", "100", "100", "257", "0", "0", "0"],
            ["0", "-9", "0", "0", "0", "0", "0", "0", "0"],
            ["0", "9", "0", "0", "0", "0", "0", "0", "-1"],
        ] {
            let bytes = reply(f);
            assert!(AcquireReply::from_resp(bytes.as_bytes()).is_none(), "{f:?}");
            let v = redis::parse_redis_value(bytes.as_bytes()).unwrap();
            assert!(AcquireReply::from_redis_value(v).is_err(), "{f:?}");
        }
    }

    /// The question and the decision share the call's budget: a server slow to answer both
    /// (each in 60% of the budget) fails the connection's first decision by its deadline, never
    /// decides after it.
    #[test]
    fn the_question_and_the_first_decision_share_one_budget() {
        let port = slow_module_server(Duration::from_millis(300));
        let settings = RedisSettings {
            target: Target::parse(&format!("redis://127.0.0.1:{port}/0"), &[]).unwrap(),
            prefix: "rl:".into(),
            timeout_ms: 500,
            flush_ms: 0,
        };
        let mut s = RedisStore::new(settings, None, system_clock(), OpsLog::none());
        let key = BucketKey {
            bucket: [1; 16],
            group: [2; 16],
            previous: None,
        };
        let ask = Ask::new(Policy::new(5, 1_000).unwrap(), 1, 0);
        let t0 = Instant::now();
        let e = s
            .acquire(&key, &ask, 1_000, &mut Counters::default())
            .unwrap_err();
        let took = t0.elapsed();
        // Two budgets would have answered, at 600 ms: the timeout is the budget's.
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        // 500 ms and a tick on an idle machine; the margin is for a loaded one.
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }
}
