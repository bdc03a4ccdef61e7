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
use super::RedisStore;
use crate::storage::{ErrorKind, StoreError};
use redis::Script;
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
        let key = keys.first().map_or("", String::as_str);
        // One budget for the whole call: the question (first call of a connection), the
        // command, and the script after a command the server turned out not to know.
        let deadline = self.conn.budget();
        self.detected_by(key, deadline)?;
        if self.path == Path::Module {
            let now = self.now_arg();
            let (keys, args) = short_form(command, keys, args);
            // `NAME numkeys keys.. now args..`, packed by hand (see `resp::pack`).
            let numkeys = keys.len().to_string();
            let mut packed = Vec::with_capacity(256);
            super::resp::pack(
                &mut packed,
                3 + keys.len() + args.len(),
                [command.name().as_bytes(), numkeys.as_bytes()]
                    .into_iter()
                    .chain(keys.iter().map(|k| k.as_bytes()))
                    .chain([now.as_bytes()])
                    .chain(args.iter().map(|a| a.as_bytes())),
            );
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
