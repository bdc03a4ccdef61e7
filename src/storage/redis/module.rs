//! The native commands of `redis-module/` (`libratelimit_redis.so`, issue 24), used when the
//! server has them, else the scripts. Each command takes what `EVALSHA` of its script takes
//! after the SHA and answers exactly as the script does (same keys, stored values, reply and
//! clock), so the reply is read by the same code, and hosts with and without the module share
//! every bucket.
//!
//! Detection: the first decision of a connection asks `COMMAND INFO` for the five commands on
//! the server that will run it. A decision that meets a lost connection or a timeout detects
//! again on its next call (a server restarted with or without `--loadmodule`, a rolling upgrade);
//! a command a server turns out not to know (a Cluster node not yet upgraded) did nothing, and
//! the call is made again with the script.

use super::conn::Route;
use super::RedisStore;
use crate::storage::{ErrorKind, StoreError};
use redis::Script;
use std::sync::atomic::{AtomicU8, Ordering};

/// The native commands, by the script each one stands for.
#[derive(Clone, Copy)]
pub(super) enum Command {
    Acquire,
    AcquireAll,
    Peek,
    Release,
    Reset,
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
fn short_form<'a>(
    command: Command,
    keys: &'a [String],
    args: &'a [String],
) -> (&'a [String], std::borrow::Cow<'a, [String]>) {
    // acquire.lua's arguments after `now`: limit, per_ms, cost, max_inflight, lease_ttl_ms,
    // lease, dry_run, request_ttl_ms, bucket name, terms, replays, policy.
    match (command, keys, args) {
        (
            Command::Acquire,
            [bucket, ..],
            [limit, per, cost, inflight, _, _, dry, request, _, _, _, policy],
        ) if inflight == "0" && request == "0" => {
            let mut short = vec![limit.clone(), per.clone(), cost.clone()];
            if dry == "1" || policy != "0" {
                short.push(dry.clone());
            }
            if policy != "0" {
                short.push(policy.clone());
            }
            (std::slice::from_ref(bucket), short.into())
        }
        _ => (keys, args.into()),
    }
}

impl RedisStore {
    /// Asks the server that serves `key` whether it has every native command; an ACL that
    /// forbids asking counts as no.
    fn detect(&mut self, key: &str) -> Result<Path, StoreError> {
        let names: Vec<&str> = Command::ALL.iter().map(|c| c.name()).collect();
        let found: Result<Vec<redis::Value>, StoreError> = self.conn.call(Route::Key(key), |c| {
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
        if self.path == Path::Unknown {
            self.path = self.detect(key)?;
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
        self.ensure_detected(key)?;
        if self.path == Path::Module {
            let now = self.now_arg();
            let (keys, args) = short_form(command, keys, args);
            let r = self.conn.call(Route::Key(key), |c| {
                redis::cmd(command.name())
                    .arg(keys.len())
                    .arg(keys)
                    .arg(&now)
                    .arg(&args)
                    .query(c)
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
        let r = self.eval(script, keys, &args);
        if matches!(&r, Err(e) if may_have_changed(e)) {
            self.path = Path::Unknown;
        }
        r
    }

    /// `RL.RESET` where the server has it, else `DEL` of the same keys.
    pub(super) fn forget(&mut self, keys: &[String]) -> Result<u64, StoreError> {
        let key = keys.first().map_or("", String::as_str);
        self.ensure_detected(key)?;
        let native = self.path == Path::Module;
        let r = self.conn.call(Route::Key(key), |c| {
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
                self.conn
                    .call(Route::Key(key), |c| redis::cmd("DEL").arg(keys).query(c))
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

    /// Decides with the scripts even where the server has the native commands (tests comparing
    /// the two paths, operators ruling the module out).
    pub fn scripts_only(mut self) -> Self {
        self.path = Path::Script;
        self
    }
}
