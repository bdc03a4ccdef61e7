//! The `ratelimit.*` php.ini directives: names, defaults, and parsing. A value that cannot work
//! (it does not parse, is out of range, or is a relative path) is never replaced by a guess: the
//! directive is marked broken ([`Config::apply`]), the PHP glue warns at startup naming it, and
//! every call fails with an error naming it until it is fixed ([`Config::broken_error`]).

use super::bucket::{Policy, MAX_LIMIT};
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::Arc;

/// The file every worker of the host shares when `ratelimit.db_path` is empty, in
/// [`Config::default_dir`].
pub const DEFAULT_DB_NAME: &str = "php-ratelimit.sqlite";

/// One php.ini directive: its name, its default, what it accepts, which backend reads it, what
/// it does, and how its text sets the configuration. The PHP glue registers exactly these (see
/// `php/ini.rs`); nothing else lists them: docs/configuration.md and the stub's table are
/// rendered from them ([`reference_markdown`], [`stub_table`]) and checked by `tests/docs.rs`.
pub struct Directive {
    pub name: &'static CStr,
    pub default: &'static CStr,
    /// The values it takes, as a value refused says ("expected <accepts>", or part of it).
    pub accepts: &'static str,
    /// `any`, `sqlite` or `redis` (with a note).
    pub backend: &'static str,
    /// What it does, for the reference (Markdown, one paragraph, no `|`).
    pub doc: &'static str,
    pub set: fn(&mut Config, &str) -> Result<(), Invalid>,
}

const fn directive(
    name: &'static CStr,
    default: &'static CStr,
    accepts: &'static str,
    backend: &'static str,
    doc: &'static str,
    set: fn(&mut Config, &str) -> Result<(), Invalid>,
) -> Directive {
    Directive {
        name,
        default,
        accepts,
        backend,
        doc,
        set,
    }
}

/// The directives every backend reads.
pub const SHARED: [Directive; 12] = [
    directive(c"ratelimit.key_file", c"",
        "an absolute path to a file (or empty for the default)",
        "any",
        "The HMAC key: 32 random bytes or more (`head -c 32 /dev/urandom`), a file of the pool's user readable by it alone (0600 or 0400), outside the web root and apart from the database. Empty: `<db_path>.key`, created 0600 on first use (for development only). Required with `redis`: the same key on every host. Missing, short, weak or not ours: `RateLimit\\Exception`.", |c, v| {
        c.key_file = absolute(v)?;
        Ok(())
    }),
    directive(c"ratelimit.key_file_previous", c"",
        "an absolute path to a file (or empty for the default)",
        "any",
        "During a key rotation only: the replaced key file. A bucket missing under the new key is moved from its name under this one (SQLite; on Redis clients start afresh once).", |c, v| {
        c.key_file_previous = absolute(v)?;
        Ok(())
    }),
    directive(c"ratelimit.key_fingerprint", c"",
        "empty or the key's 16 hex digits (phpinfo's \"Key fingerprint\")",
        "any",
        "Optional: the key every host must hold, as the 16 hex digits `phpinfo()` shows under \"Key fingerprint\". Another key is a `RateLimit\\Exception` on that host, before any store is asked.", |c, v| {
        c.key_fingerprint = match v.trim() {
            "" => None,
            hex => Some(short_fingerprint(hex).ok_or(Invalid(
                "expected empty or the key's 16 hex digits (phpinfo's \"Key fingerprint\")",
            ))?),
        };
        Ok(())
    }),
    directive(c"ratelimit.limit", c"60",
        "an integer from 1 to 10^12",
        "any",
        "Default `$limit`: tokens per bucket.", |c, v| {
        c.limit = int_in(v, 1, MAX_LIMIT, "expected an integer from 1 to 10^12")?;
        Ok(())
    }),
    directive(c"ratelimit.per", c"60",
        "seconds from 0.001 to 10^9",
        "any",
        "Default `$per`: seconds to refill `$limit` tokens.", |c, v| {
        c.per_ms = seconds_ms(
            v,
            1,
            1_000_000_000_000,
            "expected seconds from 0.001 to 10^9",
        )?;
        Ok(())
    }),
    directive(c"ratelimit.inflight", c"0",
        "an integer from 0 to 1000000",
        "any",
        "Default `$inflight`: live leases per subject and scope (0: no lease).", |c, v| {
        c.inflight = int_in(v, 0, 1_000_000, "expected an integer from 0 to 1000000")?;
        Ok(())
    }),
    directive(c"ratelimit.lease_ttl", c"60",
        "seconds from 0.001 to 31536000",
        "any",
        "Seconds after which a lease that was never released expires (its worker was killed, say).", |c, v| {
        c.lease_ttl_ms = seconds_ms(
            v,
            1,
            31_536_000_000,
            "expected seconds from 0.001 to 31536000",
        )?;
        Ok(())
    }),
    directive(c"ratelimit.ipv6_prefix", c"64",
        "an integer from 0 to 128",
        "any",
        "IPv6 subjects are cut to this many bits before hashing: a client is limited per /64 by default.", |c, v| {
        c.ipv6_prefix = int_in(v, 0, 128, "expected an integer from 0 to 128")? as u8;
        Ok(())
    }),
    directive(c"ratelimit.fail_open", c"0",
        "0 or 1 (also on/off, yes/no, true/false; empty is 0)",
        "any",
        "1: an \"unavailable\" decision is allowed (without a lease). 0: it is a denial. See failure modes.", |c, v| {
        c.fail_open = boolean(v)?;
        Ok(())
    }),
    directive(c"ratelimit.dry_run", c"",
        "empty, * or scopes (1 to 64 characters of [A-Za-z0-9_.:-]) separated by commas",
        "any",
        "Shadow mode: empty (off), `*` (every scope) or a list of scopes. Their `rate` and `inflight` denials are answered allowed with `dryRun` true (charged as for real: a denial takes nothing, gets no lease, sends no Retry-After), counted as `dry_run_denied`. \"unavailable\" stays unavailable (only `fail_open` admits it).", |c, v| {
        c.dry_run = DryRun::parse(v)?;
        Ok(())
    }),
    directive(c"ratelimit.request_ttl", c"60",
        "seconds from 0.001 to 31536000",
        "any",
        "Seconds an admission with a `$request_id` is remembered for its retries (with a lease, at least `ratelimit.lease_ttl`).", |c, v| {
        c.request_ttl_ms = seconds_ms(
            v,
            1,
            31_536_000_000,
            "expected seconds from 0.001 to 31536000",
        )?;
        Ok(())
    }),
    // 3: a client's usual retry budget (see core::request::DEFAULT_REPLAYS).
    directive(c"ratelimit.request_replays", c"3",
        "an integer from 0 to 1000",
        "any",
        "How many times such an admission is replayed (answered again, taking nothing, `$replay` true; 0: never); after that, a retry is charged like any call.", |c, v| {
        c.request_replays = int_in(
            v,
            0,
            u64::from(super::request::MAX_REPLAYS),
            "expected an integer from 0 to 1000",
        )? as u32;
        Ok(())
    }),
];

/// Shadow mode (`ratelimit.dry_run`): the scopes whose denials are answered `allowed`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DryRun {
    /// Off (the default, an empty value).
    #[default]
    Off,
    /// `*`: every scope.
    All,
    /// A comma-separated list of scopes (spaces around the commas allowed).
    Scopes(Vec<String>),
}

impl DryRun {
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(DryRun::Off);
        }
        if value == "*" {
            return Ok(DryRun::All);
        }
        value
            .split(',')
            .map(|s| {
                let s = s.trim();
                super::subject::valid_scope(s.as_bytes())
                    .then(|| s.to_string())
                    .ok_or(Invalid(
                        "expected empty, * or scopes (1 to 64 characters of [A-Za-z0-9_.:-]) separated by commas",
                    ))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(DryRun::Scopes)
    }

    /// Whether `scope` is a shadow one.
    pub fn covers(&self, scope: &str) -> bool {
        match self {
            DryRun::Off => false,
            DryRun::All => true,
            DryRun::Scopes(list) => list.iter().any(|s| s == scope),
        }
    }
}

/// The directives of the SQLite backend.
pub const SQLITE: [Directive; 3] = [
    directive(c"ratelimit.db_path", c"",
        "an absolute path to a file (or empty for the default)",
        "sqlite (redis: the host's file)",
        "The SQLite file every worker of the host shares, on a local file system (never NFS). Empty: `php-ratelimit.sqlite` in `<temp dir>/php-ratelimit-<euid>/` (created 0700). With `redis`: the file of the host's breaker (`<db_path>.breaker`) and of the local fallback.", |c, v| {
        c.sqlite.db_path = absolute(v)?;
        Ok(())
    }),
    directive(c"ratelimit.busy_timeout_ms", c"100",
        "milliseconds from 0 to 60000",
        "sqlite",
        "How long a decision waits for the database's write lock before it is \"unavailable\".", |c, v| {
        c.sqlite.busy_timeout_ms = int_in(v, 0, 60_000, "expected milliseconds from 0 to 60000")?;
        Ok(())
    }),
    directive(c"ratelimit.max_entries", c"100000",
        "an integer from 1 to 10^9",
        "sqlite",
        "Most buckets kept: beyond it drained buckets, then the least recently used bucket without a live lease (of a random sample of 64, in a larger table), are dropped (counted as `evicted`). Redis does not use it: idle keys expire.", |c, v| {
        c.sqlite.max_entries = int_in(v, 1, 1_000_000_000, "expected an integer from 1 to 10^9")?;
        Ok(())
    }),
];

/// The directives of the Redis backend (and of its breaker and fallback).
pub const REDIS: [Directive; 13] = [
    directive(c"ratelimit.backend", c"sqlite",
        "sqlite or redis",
        "any",
        "Where the buckets live: `sqlite` (one file per host) or `redis` (one Redis or Redis Cluster for every host of a site).", |c, v| {
        c.backend = match v.trim() {
            "sqlite" => Backend::Sqlite,
            "redis" => Backend::Redis,
            _ => return Err(Invalid("expected sqlite or redis")),
        };
        Ok(())
    }),
    directive(
        c"ratelimit.redis_url",
        c"redis://127.0.0.1:6379/0",
        "a redis://, rediss:// or unix:// URL",
        "redis",
        "The Redis server: `redis://[user:password@]host:port/db`, `rediss://` for TLS (roots from the system or `SSL_CERT_FILE`), `unix:///path/redis.sock`. Never shown in a warning.",
        |c, v| {
            c.redis.url = redis_url(v)?;
            Ok(())
        },
    ),
    directive(c"ratelimit.redis_cluster", c"",
        "empty, or seed nodes separated by commas, each a redis://, rediss:// or unix:// URL",
        "redis",
        "Seed nodes of a Redis Cluster; not empty: cluster mode (`redis_url` unused).", |c, v| {
        c.redis.cluster = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(redis_url)
            .collect::<Result<_, _>>()?;
        Ok(())
    }),
    directive(c"ratelimit.redis_sentinel", c"",
        "empty, or Sentinels separated by commas, each host:port or a redis:// or rediss:// URL",
        "redis",
        "Sentinels watching the master; not empty: Sentinel mode. The master named `redis_sentinel_master` is asked for from one Sentinel after another within the call's budget, checked with ROLE, and asked for again after a failover (a connection error, a `-READONLY` reply, or every second). `redis_url` then gives only the master's password, database and TLS (`rediss://`); a Sentinel given as host:port uses the same TLS and no password, a URL gives its own.", |c, v| {
        c.redis.sentinel = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(sentinel_addr)
            .collect::<Result<_, _>>()?;
        Ok(())
    }),
    directive(c"ratelimit.redis_sentinel_master", c"",
        "empty, or a master name (1 to 128 characters, no spaces)",
        "redis",
        "The name of the master the Sentinels watch (`sentinel monitor <name> ...`); required with `redis_sentinel`.", |c, v| {
        let v = v.trim();
        if v.len() > 128 || !v.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Invalid("expected empty, or a master name (1 to 128 characters, no spaces)"));
        }
        c.redis.sentinel_master = v.to_string();
        Ok(())
    }),
    directive(c"ratelimit.redis_prefix", c"rl:",
        "1 to 64 printable characters, without spaces or braces",
        "redis",
        "Put before every key, so that several sites can share one Redis.", |c, v| {
        let ok = (1..=64).contains(&v.len())
            && v.bytes()
                .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}');
        if !ok {
            return Err(Invalid(
                "expected 1 to 64 printable characters, without spaces or braces",
            ));
        }
        c.redis.prefix = v.to_string();
        Ok(())
    }),
    directive(c"ratelimit.redis_timeout_ms", c"50",
        "milliseconds from 1 to 60000",
        "redis",
        "The most one call waits for Redis, every step together: resolving the host name, connecting, TLS, AUTH and SELECT, asking a Sentinel or reading a Cluster's slot map, writing, and every read; then \"unavailable\" (or the local fallback).", |c, v| {
        c.redis.timeout_ms = int_in(v, 1, 60_000, "expected milliseconds from 1 to 60000")?;
        Ok(())
    }),
    directive(c"ratelimit.redis_fallback", c"none",
        "none or local",
        "redis",
        "While Redis is unavailable: `none` (\"unavailable\", then `fail_open`) or `local` (decide with this host's SQLite file at `db_path`: the limit becomes per host).", |c, v| {
        c.redis.fallback = match v.trim() {
            // php.ini reads the bare word `none` as an empty string.
            "" | "none" => Fallback::None,
            "local" => Fallback::Local,
            _ => return Err(Invalid("expected none or local")),
        };
        Ok(())
    }),
    directive(c"ratelimit.redis_value_form", c"text",
        "text or binary",
        "redis",
        "The form the scripts write a new bucket's value in (docs/redis.md, \"A bucket's stored value\"): `text`, which every build reads, or `binary`, some 13% less of the server's work a decision on the scripts' path, which older builds (those without this setting) cannot read: set it once every host of the site runs a build that has it. Every path reads both forms and keeps a bucket in the form it found it.", |c, v| {
        c.redis.binary_values = match v.trim() {
            "text" => false,
            "binary" => true,
            _ => return Err(Invalid("expected text or binary")),
        };
        Ok(())
    }),
    directive(c"ratelimit.redis_allow_eviction", c"0",
        "0 or 1 (also on/off, yes/no, true/false; empty is 0)",
        "redis",
        "1: decide also on a Redis whose `maxmemory-policy` evicts keys (every bucket has a time to live, so `volatile-*` policies evict them too: a silently reset limit). 0: such a server is a `RateLimit\\Exception` on every call.", |c, v| {
        c.redis.allow_eviction = boolean(v)?;
        Ok(())
    }),
    directive(c"ratelimit.redis_breaker_failures", c"5",
        "an integer from 1 to 1000000",
        "redis",
        "Redis failures within `redis_breaker_window_ms` that open the host's breaker (calls then skip Redis).", |c, v| {
        c.redis.breaker.failures =
            int_in(v, 1, 1_000_000, "expected an integer from 1 to 1000000")?;
        Ok(())
    }),
    directive(c"ratelimit.redis_breaker_window_ms", c"10000",
        "milliseconds from 1 to 3600000",
        "redis",
        "The window of `redis_breaker_failures`.", |c, v| {
        c.redis.breaker.window_ms =
            int_in(v, 1, 3_600_000, "expected milliseconds from 1 to 3600000")?;
        Ok(())
    }),
    directive(c"ratelimit.redis_breaker_retry_ms", c"1000",
        "milliseconds from 1 to 3600000",
        "redis",
        "How long the breaker stays open before one probe per host, always a decision, is let \
         through (other calls stay refused until it closes the breaker).", |c, v| {
        c.redis.breaker.retry_ms =
            int_in(v, 1, 3_600_000, "expected milliseconds from 1 to 3600000")?;
        Ok(())
    }),
];

/// 16 hex digits: the first 8 bytes of a key's fingerprint, as operators compare them.
fn short_fingerprint(hex: &str) -> Option<[u8; 8]> {
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 8];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A path every process resolves alike: absolute, or empty for the default. A relative path
/// would be resolved against each process's working directory, giving processes of one host
/// different files, and so one limit split in as many. It names a file: one ending in `/`,
/// `/.` or `/..` names a directory, beside which no `<path>.queue`, `.breaker` or `.key` can be.
fn absolute(v: &str) -> Result<String, Invalid> {
    let names_a_directory = v.ends_with('/') || v.ends_with("/.") || v.ends_with("/..");
    if v.is_empty() || (v.starts_with('/') && !names_a_directory) {
        Ok(v.to_string())
    } else {
        Err(Invalid(
            "expected an absolute path to a file (or empty for the default)",
        ))
    }
}

/// The value of directive `name` as it may be shown in a warning: never a Redis address's (a
/// mistyped one may hold a password anywhere), and no control character.
pub fn shown(name: &str, value: &str) -> String {
    if name.starts_with("ratelimit.redis_url")
        || name.starts_with("ratelimit.redis_cluster")
        || name == "ratelimit.redis_sentinel"
    {
        return "(not shown: it may hold a password)".into();
    }
    format!("{value:?}")
}

/// A Redis address as `redis://`, `rediss://` (TLS) or `unix://` (or `redis+unix://`); the
/// connection checks the rest when it first connects.
fn redis_url(v: &str) -> Result<String, Invalid> {
    let v = v.trim();
    let ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
        .iter()
        .any(|s| v.len() > s.len() && v.starts_with(s));
    ok.then(|| v.to_string())
        .ok_or(Invalid("expected a redis://, rediss:// or unix:// URL"))
}

/// A Sentinel: `host:port`, or a `redis://` / `rediss://` URL (with its own password).
fn sentinel_addr(v: &str) -> Result<String, Invalid> {
    const WHY: &str =
        "expected empty, or Sentinels separated by commas, each host:port or a redis:// or rediss:// URL";
    if v.starts_with("redis://") || v.starts_with("rediss://") {
        return redis_url(v).map_err(|_| Invalid(WHY));
    }
    let ok = v.rsplit_once(':').is_some_and(|(h, p)| {
        !h.is_empty()
            && !h.contains('/')
            && !h.contains('@')
            && p.parse::<u16>().is_ok_and(|p| p > 0)
    });
    ok.then(|| v.to_string()).ok_or(Invalid(WHY))
}

/// Every directive.
pub fn directives() -> impl Iterator<Item = &'static Directive> {
    SHARED.iter().chain(SQLITE.iter()).chain(REDIS.iter())
}

/// The reference table of every directive (Markdown), as docs/configuration.md holds it between
/// its markers.
pub fn reference_markdown() -> String {
    let mut out = String::from("| directive | default | accepts | backend | what it does |\n| --- | --- | --- | --- | --- |\n");
    for d in directives() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            d.name.to_str().expect("names are ASCII"),
            shown_default(d),
            d.accepts.replace('*', "\\*"),
            d.backend,
            d.doc
        ));
    }
    out
}

/// The directive table of `stubs/ratelimit.stub.php` (the lines of its doc comment between its
/// markers). The default is quoted, as php-tests/stub_matches_reflection.phpt reads it to
/// compare it with the loaded extension's.
pub fn stub_table() -> String {
    let mut out =
        String::from(" * | directive | default | accepts | what it does |\n * |---|---|---|---|\n");
    for d in directives() {
        out.push_str(&format!(
            " * | {} | \"{}\" | {} | {} |\n",
            d.name.to_str().expect("names are ASCII"),
            d.default.to_str().expect("defaults are ASCII"),
            d.accepts,
            d.doc
        ));
    }
    out
}

fn shown_default(d: &Directive) -> String {
    match d.default.to_str().expect("defaults are ASCII") {
        "" => "(empty)".to_string(),
        v => format!("`{v}`"),
    }
}

/// Where the buckets live (`ratelimit.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// One SQLite file, shared by the workers of one host.
    #[default]
    Sqlite,
    /// One Redis (or Redis Cluster), shared by every host of a site.
    Redis,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Redis => "redis",
        }
    }
}

/// What decides while Redis is unavailable (`ratelimit.redis_fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Nothing: the decision is "unavailable" (then `fail_open` applies).
    #[default]
    None,
    /// This host's SQLite file: the limit becomes per host, never per worker.
    Local,
}

/// When the host-wide breaker opens and probes again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BreakerConfig {
    /// Failures within `window_ms` that open it.
    pub failures: u64,
    pub window_ms: u64,
    /// How long it stays open before one probe is let through.
    pub retry_ms: u64,
}

/// What only the Redis backend reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RedisConfig {
    pub url: String,
    /// Seed nodes; not empty: cluster mode (and `url` is not used).
    pub cluster: Vec<String>,
    /// Sentinels (host:port or URLs); not empty: Sentinel mode (`url` gives the master's
    /// password, database and TLS only).
    pub sentinel: Vec<String>,
    /// The master's name at the Sentinels.
    pub sentinel_master: String,
    /// Put before every key, so that several sites can share one Redis.
    pub prefix: String,
    /// Connect, read and write, each.
    pub timeout_ms: u64,
    pub fallback: Fallback,
    pub breaker: BreakerConfig,
    /// Decide also on a server whose `maxmemory-policy` evicts keys (refused by default).
    pub allow_eviction: bool,
    /// Write new buckets in the binary form (`ratelimit.redis_value_form = binary`).
    pub binary_values: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// Empty: `<db_path>.key`, created on first use.
    pub key_file: String,
    /// During a key rotation: the key file replaced, whose buckets move to the new key.
    pub key_file_previous: String,
    /// The key every host must hold (first 8 bytes of its fingerprint), if pinned.
    pub key_fingerprint: Option<[u8; 8]>,
    pub limit: u64,
    pub per_ms: u64,
    pub inflight: u64,
    pub lease_ttl_ms: u64,
    pub ipv6_prefix: u8,
    pub fail_open: bool,
    pub dry_run: DryRun,
    /// How long an admission with a request id is remembered (with a lease, at least as long
    /// as the lease).
    pub request_ttl_ms: u64,
    /// How many times a remembered admission may be replayed (0: never).
    pub request_replays: u32,
    pub backend: Backend,
    pub sqlite: SqliteConfig,
    pub redis: RedisConfig,
    /// Directives set to a value that cannot work, with why (see [`Config::apply`]).
    pub broken: Vec<(String, &'static str)>,
}

/// What only the SQLite backend reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SqliteConfig {
    /// Empty: [`DEFAULT_DB_NAME`] in the per-user directory [`Config::default_dir`].
    pub db_path: String,
    pub busy_timeout_ms: u64,
    pub max_entries: u64,
}

impl Config {
    /// Every directive at its default.
    pub fn defaults() -> Self {
        let mut c = Config::default();
        for d in directives() {
            let value = d.default.to_str().expect("defaults are ASCII");
            (d.set)(&mut c, value).expect("defaults parse");
        }
        c
    }
}

/// A value refused for a directive; the text completes "Invalid value for NAME: ...".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

fn int_in(value: &str, lo: u64, hi: u64, why: &'static str) -> Result<u64, Invalid> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or(Invalid(why))
}

fn seconds_ms(value: &str, lo_ms: u64, hi_ms: u64, why: &'static str) -> Result<u64, Invalid> {
    let secs: f64 = value.trim().parse().map_err(|_| Invalid(why))?;
    Policy::per_ms_from_seconds(secs)
        .filter(|ms| (lo_ms..=hi_ms).contains(ms))
        .ok_or(Invalid(why))
}

fn boolean(value: &str) -> Result<bool, Invalid> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Ok(true),
        "" | "0" | "off" | "no" | "false" | "none" => Ok(false),
        _ => Err(Invalid("expected 0 or 1")),
    }
}

impl Config {
    /// Sets one directive from its php.ini text. Unknown names are refused too.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), Invalid> {
        let d = directives()
            .find(|d| d.name.to_bytes() == name.as_bytes())
            .ok_or(Invalid("unknown directive"))?;
        if value.contains('\0') {
            // Paths and addresses are C strings to the system: a NUL would cut them short.
            return Err(Invalid("a NUL byte is not allowed"));
        }
        (d.set)(self, value)
    }

    /// Sets one directive as php.ini does: a value that cannot work marks the directive broken
    /// (no other value stands in for it, not even the default: a mistyped path or address must
    /// not quietly become another), a good one mends it. Returns why a value was refused.
    /// A directive broken before keeps its place in the list, so that applying the same
    /// values again (a ZTS thread's start) gives an equal configuration.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), Invalid> {
        let set = self.set(name, value);
        self.note(name, &set);
        set
    }

    /// Marks `name` broken for a value refused before it could be parsed (not UTF-8).
    pub fn refuse(&mut self, name: &str, why: Invalid) -> Result<(), Invalid> {
        let refused = Err(why);
        self.note(name, &refused);
        refused
    }

    /// Notes how setting `name` went: a refusal keeps its place in the list of broken
    /// directives (the same values applied again give the same configuration).
    fn note(&mut self, name: &str, set: &Result<(), Invalid>) {
        let at = self.broken.iter().position(|(n, _)| n == name);
        match (set, at) {
            (Err(why), Some(i)) => self.broken[i].1 = why.0,
            (Err(why), None) => self.broken.push((name.to_string(), why.0)),
            (Ok(()), Some(i)) => {
                self.broken.remove(i);
            }
            (Ok(()), None) => {}
        }
    }

    /// [`Config::applied`] of a value as PHP passes it, in bytes: one that is not UTF-8 is
    /// refused, never rewritten (two different byte paths must not become one file).
    pub fn applied_bytes(
        current: Option<&Arc<Config>>,
        name: &str,
        raw: &[u8],
    ) -> (Arc<Config>, Result<(), Invalid>) {
        match std::str::from_utf8(raw) {
            Ok(value) => Config::applied(current, name, value),
            Err(_) => {
                Config::changed_by(current, |c| c.refuse(name, Invalid("expected UTF-8 text")))
            }
        }
    }

    /// `current` with `name` applied (see [`Config::apply`]): `current` itself, the same
    /// `Arc`, when that changes nothing. PHP applies every directive again at each ZTS
    /// thread's start; whoever compares configurations by pointer (a worker deciding whether
    /// to reopen, and so forget the leases its request holds) must then see no change.
    pub fn applied(
        current: Option<&Arc<Config>>,
        name: &str,
        value: &str,
    ) -> (Arc<Config>, Result<(), Invalid>) {
        Config::changed_by(current, |c| c.apply(name, value))
    }

    /// `current` changed by `change`, or `current` itself when that changed nothing.
    fn changed_by(
        current: Option<&Arc<Config>>,
        change: impl FnOnce(&mut Config) -> Result<(), Invalid>,
    ) -> (Arc<Config>, Result<(), Invalid>) {
        let mut next = current.map_or_else(Config::defaults, |c| Config::clone(c));
        let result = change(&mut next);
        let next = match current {
            Some(c) if **c == next => Arc::clone(c),
            _ => Arc::new(next),
        };
        (next, result)
    }

    /// The error every call gets while a directive is broken: names each, never its value
    /// (a Redis URL may hold a password).
    pub fn broken_error(&self) -> Option<String> {
        if self.broken.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .broken
            .iter()
            .map(|(n, why)| format!("{n} ({why})"))
            .collect();
        Some(format!(
            "invalid php.ini value for {}: no decision is made until it is fixed",
            each.join(", ")
        ))
    }

    /// The per-user directory of the default database and key: `<temp_dir>/php-ratelimit-<euid>`
    /// (mode 0700, created and checked by the caller: this core does no I/O).
    pub fn default_dir(temp_dir: &std::path::Path, euid: u32) -> PathBuf {
        temp_dir.join(format!("php-ratelimit-{euid}"))
    }

    /// The database file, with the default resolved against `temp_dir` and the effective uid.
    pub fn db_path(&self, temp_dir: &std::path::Path, euid: u32) -> PathBuf {
        if self.sqlite.db_path.is_empty() {
            Self::default_dir(temp_dir, euid).join(DEFAULT_DB_NAME)
        } else {
            PathBuf::from(&self.sqlite.db_path)
        }
    }

    /// The key file and whether it is the default one (which is created when missing).
    pub fn key_path(&self, temp_dir: &std::path::Path, euid: u32) -> (PathBuf, bool) {
        if self.key_file.is_empty() {
            let mut p = self.db_path(temp_dir, euid).into_os_string();
            p.push(".key");
            (PathBuf::from(p), true)
        } else {
            (PathBuf::from(&self.key_file), false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::defaults();
        assert_eq!(
            (c.limit, c.per_ms, c.inflight, c.lease_ttl_ms),
            (60, 60_000, 0, 60_000)
        );
        assert_eq!(
            (
                c.sqlite.busy_timeout_ms,
                c.sqlite.max_entries,
                c.ipv6_prefix,
                c.fail_open
            ),
            (100, 100_000, 64, false)
        );
    }

    /// PHP applies every directive again at each ZTS thread's start: with the same values, the
    /// configuration in force stays the very same `Arc`, broken directives included; a changed
    /// value gives a new one.
    #[test]
    fn applying_the_same_values_again_keeps_the_same_configuration() {
        let values = [
            ("ratelimit.limit", "7"),
            ("ratelimit.lease_ttl", "5"),
            ("ratelimit.per", "oops"),
            ("ratelimit.ipv6_prefix", "200"),
        ];
        let mut current: Option<Arc<Config>> = None;
        for (name, value) in values {
            current = Some(Config::applied(current.as_ref(), name, value).0);
        }
        let first = current.clone().unwrap();
        assert_eq!(first.broken.len(), 2);
        for _thread in 0..3 {
            for (name, value) in values {
                let (next, result) = Config::applied(current.as_ref(), name, value);
                assert_eq!(result.is_err(), value == "oops" || value == "200");
                current = Some(next);
            }
            assert!(Arc::ptr_eq(current.as_ref().unwrap(), &first));
        }
        let (changed, _) = Config::applied(current.as_ref(), "ratelimit.limit", "8");
        assert!(!Arc::ptr_eq(&changed, &first));
        assert_eq!(changed.limit, 8);
        let (mended, ok) = Config::applied(Some(&changed), "ratelimit.per", "60");
        assert!(ok.is_ok());
        assert_eq!(
            mended.broken,
            [("ratelimit.ipv6_prefix".to_string(), first.broken[1].1)]
        );
    }

    #[test]
    fn invalid_values_are_refused_and_the_old_value_stays() {
        let mut c = Config::defaults();
        assert!(c.set("ratelimit.limit", "abc").is_err());
        assert!(c.set("ratelimit.limit", "0").is_err());
        assert!(c.set("ratelimit.per", "0").is_err());
        assert!(c.set("ratelimit.per", "NaN").is_err());
        assert!(c.set("ratelimit.ipv6_prefix", "129").is_err());
        assert!(c.set("ratelimit.fail_open", "maybe").is_err());
        assert_eq!(c, Config::defaults());
    }

    #[test]
    fn valid_values_are_taken() {
        let mut c = Config::defaults();
        c.set("ratelimit.per", "0.5").unwrap();
        c.set("ratelimit.lease_ttl", "2").unwrap();
        c.set("ratelimit.fail_open", "On").unwrap();
        assert_eq!((c.per_ms, c.lease_ttl_ms, c.fail_open), (500, 2_000, true));
    }

    #[test]
    fn every_directive_is_named_once() {
        let names: Vec<_> = directives().map(|d| d.name).collect();
        assert_eq!(names.len(), 28);
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert!(names
            .iter()
            .all(|n| n.to_bytes().starts_with(b"ratelimit.")));
    }

    #[test]
    fn dry_run_is_off_all_or_a_list_of_valid_scopes() {
        let mut c = Config::defaults();
        assert_eq!((c.dry_run.clone(), c.request_ttl_ms), (DryRun::Off, 60_000));
        assert!(!c.dry_run.covers("default"));
        c.set("ratelimit.dry_run", "*").unwrap();
        assert!(c.dry_run.covers("default") && c.dry_run.covers("x"));
        c.set("ratelimit.dry_run", " api , login:v2").unwrap();
        assert!(c.dry_run.covers("api") && c.dry_run.covers("login:v2"));
        assert!(!c.dry_run.covers("default"));
        for bad in ["api,", ",", "a b", "api,*", "!request", &"x".repeat(65)] {
            assert!(c.set("ratelimit.dry_run", bad).is_err(), "{bad:?}");
        }
        assert!(c.dry_run.covers("api"), "the previous value stays");
        c.set("ratelimit.dry_run", "").unwrap();
        assert_eq!(c.dry_run, DryRun::Off);
        assert!(c.set("ratelimit.request_ttl", "0").is_err());
        c.set("ratelimit.request_ttl", "2.5").unwrap();
        assert_eq!(c.request_ttl_ms, 2_500);
    }

    #[test]
    fn request_replays_default_to_three_and_take_0_to_1000() {
        let mut c = Config::defaults();
        assert_eq!(c.request_replays, crate::core::request::DEFAULT_REPLAYS);
        assert_eq!(c.request_replays, 3);
        for bad in ["-1", "1001", "2.5", "x", ""] {
            assert!(c.set("ratelimit.request_replays", bad).is_err(), "{bad:?}");
        }
        assert_eq!(c.request_replays, 3, "the previous value stays");
        c.set("ratelimit.request_replays", "0").unwrap();
        assert_eq!(c.request_replays, 0);
        c.set("ratelimit.request_replays", " 1000 ").unwrap();
        assert_eq!(c.request_replays, 1_000);
    }

    #[test]
    fn the_redis_directives_default_to_sqlite_and_a_local_redis() {
        let c = Config::defaults();
        assert_eq!(c.backend, Backend::Sqlite);
        assert_eq!(
            (
                c.redis.url.as_str(),
                c.redis.prefix.as_str(),
                c.redis.timeout_ms
            ),
            ("redis://127.0.0.1:6379/0", "rl:", 50)
        );
        assert!(c.redis.cluster.is_empty());
        assert_eq!(c.redis.fallback, Fallback::None);
        assert_eq!(
            c.redis.breaker,
            BreakerConfig {
                failures: 5,
                window_ms: 10_000,
                retry_ms: 1_000
            }
        );
    }

    #[test]
    fn redis_directives_refuse_bad_values() {
        let mut c = Config::defaults();
        for (name, bad) in [
            ("ratelimit.backend", "mysql"),
            ("ratelimit.redis_url", "http://x"),
            ("ratelimit.redis_url", "redis://"),
            ("ratelimit.redis_cluster", "redis://a:1,tcp://b:2"),
            ("ratelimit.redis_prefix", ""),
            ("ratelimit.redis_prefix", "a{b}"),
            ("ratelimit.redis_prefix", "a b"),
            ("ratelimit.redis_timeout_ms", "0"),
            ("ratelimit.redis_fallback", "remote"),
            ("ratelimit.redis_value_form", "bin"),
            ("ratelimit.redis_value_form", ""),
            ("ratelimit.redis_breaker_failures", "0"),
        ] {
            assert!(c.set(name, bad).is_err(), "{name}={bad:?}");
        }
        assert_eq!(c, Config::defaults());
        c.set("ratelimit.backend", "redis").unwrap();
        c.set(
            "ratelimit.redis_cluster",
            " redis://127.0.0.1:7001, redis://127.0.0.1:7002 ",
        )
        .unwrap();
        c.set("ratelimit.redis_fallback", "local").unwrap();
        assert_eq!(c.backend, Backend::Redis);
        assert_eq!(c.redis.cluster.len(), 2);
        assert_eq!(c.redis.fallback, Fallback::Local);
    }

    #[test]
    fn sentinels_are_host_port_or_urls_and_the_master_a_name() {
        let mut c = Config::defaults();
        assert!(c.redis.sentinel.is_empty() && c.redis.sentinel_master.is_empty());
        c.set(
            "ratelimit.redis_sentinel",
            " 10.0.0.1:26379, sentinel-b:26380 ,rediss://:pw@10.0.0.3:26379",
        )
        .unwrap();
        assert_eq!(c.redis.sentinel.len(), 3);
        for bad in ["10.0.0.1", "a:0", "a:x", ":26379", "http://a:1", "u@a:1"] {
            assert!(c.set("ratelimit.redis_sentinel", bad).is_err(), "{bad}");
        }
        c.set("ratelimit.redis_sentinel_master", "mymaster")
            .unwrap();
        assert_eq!(c.redis.sentinel_master, "mymaster");
        assert!(c
            .set("ratelimit.redis_sentinel_master", "my master")
            .is_err());
        assert!(!shown("ratelimit.redis_sentinel", "rediss://:pw@a:1").contains("pw"));
    }

    #[test]
    fn a_pinned_key_fingerprint_is_16_hex_digits() {
        let mut c = Config::defaults();
        assert_eq!(c.key_fingerprint, None);
        c.set("ratelimit.key_fingerprint", "00ff10Ab7c3d9e01")
            .unwrap();
        assert_eq!(
            c.key_fingerprint,
            Some([0x00, 0xff, 0x10, 0xab, 0x7c, 0x3d, 0x9e, 0x01])
        );
        for bad in [
            "00ff",
            "00ff10ab7c3d9e0g",
            "00ff10ab7c3d9e0100",
            "+0ff10ab7c3d9e01",
        ] {
            assert!(c.set("ratelimit.key_fingerprint", bad).is_err(), "{bad}");
        }
        c.set("ratelimit.key_fingerprint", "").unwrap();
        assert_eq!(c.key_fingerprint, None);
    }

    #[test]
    fn paths_must_be_absolute() {
        let mut c = Config::defaults();
        for name in [
            "ratelimit.db_path",
            "ratelimit.key_file",
            "ratelimit.key_file_previous",
        ] {
            for bad in ["rl.sqlite", "./rl.sqlite", "var/lib/rl", " /x"] {
                assert!(c.set(name, bad).is_err(), "{name}={bad:?}");
            }
            c.set(name, "/var/lib/rl/x").unwrap();
            c.set(name, "").unwrap();
        }
    }

    /// A path that names a directory ("/var/lib/rl/", "/var/lib/rl/.") cannot be the file:
    /// SQLite opens the file without the slash, but every file named after it
    /// (`<db_path>.queue`, `.breaker`, `.key`) would be made inside a directory that does not
    /// exist, so the host's queue and breaker, or the default key, fail on every call.
    #[test]
    fn a_path_naming_a_directory_is_refused() {
        let mut c = Config::defaults();
        for name in [
            "ratelimit.db_path",
            "ratelimit.key_file",
            "ratelimit.key_file_previous",
        ] {
            for bad in ["/", "/var/lib/rl/", "/var/lib/rl/.", "/var/lib/rl/.."] {
                assert!(c.set(name, bad).is_err(), "{name}={bad:?}");
            }
            c.set(name, "/var/lib/rl/.x").unwrap();
        }
    }

    #[test]
    fn a_value_that_cannot_work_breaks_its_directive_until_mended() {
        let mut c = Config::defaults();
        assert_eq!(c.broken_error(), None);
        assert!(c.apply("ratelimit.db_path", "rl.sqlite").is_err());
        assert!(c.apply("ratelimit.limit", "abc").is_err());
        let e = c.broken_error().unwrap();
        assert!(
            e.contains("ratelimit.db_path (expected an absolute path"),
            "{e}"
        );
        assert!(e.contains("ratelimit.limit (expected an integer"), "{e}");
        assert!(
            !e.contains("rl.sqlite") && !e.contains("abc"),
            "no value: {e}"
        );
        c.apply("ratelimit.db_path", "/var/lib/rl.sqlite").unwrap();
        c.apply("ratelimit.limit", "5").unwrap();
        assert_eq!(c.broken_error(), None);
        assert_eq!(
            (c.sqlite.db_path.as_str(), c.limit),
            ("/var/lib/rl.sqlite", 5)
        );
    }

    #[test]
    fn a_redis_address_is_never_shown() {
        for (name, v) in [
            ("ratelimit.redis_url", "redis//default:pw@h"),
            ("ratelimit.redis_url", "Redis://:pa,ssW0rd@h:1/0"),
            ("ratelimit.redis_cluster", "redis://a:1,user:pw@b"),
        ] {
            assert!(!shown(name, v).contains("pw") && !shown(name, v).contains("ssW0rd"));
        }
        assert_eq!(
            shown("ratelimit.db_path", "rl\n.sqlite"),
            "\"rl\\n.sqlite\""
        );
    }

    #[test]
    fn a_nul_byte_is_refused_in_any_value() {
        let mut c = Config::defaults();
        for name in [
            "ratelimit.db_path",
            "ratelimit.key_file",
            "ratelimit.dry_run",
        ] {
            assert!(c.set(name, "/x\0y").is_err(), "{name}");
        }
    }

    #[test]
    fn an_unknown_directive_is_refused() {
        assert!(Config::defaults().set("ratelimit.nope", "1").is_err());
    }

    #[test]
    fn the_default_database_and_key_sit_in_a_per_user_directory() {
        let mut c = Config::defaults();
        let tmp = Path::new("/tmp");
        assert_eq!(
            c.db_path(tmp, 33),
            Path::new("/tmp/php-ratelimit-33/php-ratelimit.sqlite")
        );
        assert_eq!(
            c.key_path(tmp, 33),
            (
                PathBuf::from("/tmp/php-ratelimit-33/php-ratelimit.sqlite.key"),
                true
            )
        );
        c.set("ratelimit.db_path", "/var/lib/rl/db").unwrap();
        assert_eq!(c.db_path(tmp, 33), Path::new("/var/lib/rl/db"));
        assert_eq!(
            c.key_path(tmp, 33),
            (PathBuf::from("/var/lib/rl/db.key"), true)
        );
        c.set("ratelimit.key_file", "/etc/rl/key").unwrap();
        assert_eq!(c.key_path(tmp, 33), (PathBuf::from("/etc/rl/key"), false));
    }
}
