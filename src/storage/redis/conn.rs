//! One worker's connection to Redis (a single server, a cluster, or the master that Sentinels
//! name): made on first use, never in module startup, dropped after any error (a reply that
//! timed out may still arrive, and must never be read as the answer to the next call), and made
//! again by the next call. Every call ends by one deadline, the configured timeout after it
//! began: resolving names, connecting, TLS, AUTH/SELECT, asking a Sentinel, writing and every
//! read share it (see `link`).

use super::link::{Link, Role};
use crate::storage::{ErrorKind, StoreError};
use redis::{ConnectionLike, IntoConnectionInfo, RedisError};
use std::time::{Duration, Instant};

/// Where to connect.
#[derive(Debug, Clone)]
pub enum Target {
    Single(Box<redis::ConnectionInfo>),
    /// Seed nodes of a cluster.
    Cluster(Vec<redis::ConnectionInfo>),
    /// The master that Sentinels name: the Sentinels, the master's name, and its settings
    /// (password, database, TLS: `ratelimit.redis_url`'s; its address is not used).
    Sentinel {
        sentinels: Vec<redis::ConnectionInfo>,
        master: String,
        settings: Box<redis::ConnectionInfo>,
    },
}

/// A URL's connection settings, without CLIENT SETINFO (one round trip less when connecting).
fn info(u: &str) -> Result<redis::ConnectionInfo, StoreError> {
    u.into_connection_info()
        .map(|i| {
            let settings = i.redis_settings().clone().set_skip_set_lib_name();
            i.set_redis_settings(settings)
        })
        .map_err(|e| {
            StoreError::new(
                ErrorKind::Misconfigured,
                format!("invalid Redis URL for {}", without_credentials(u)),
            )
            .with_source(e)
        })
}

impl Target {
    /// Parses `ratelimit.redis_url`, or the seeds of `ratelimit.redis_cluster` when not empty.
    pub fn parse(url: &str, cluster: &[String]) -> Result<Self, StoreError> {
        if cluster.is_empty() {
            Ok(Target::Single(Box::new(info(url)?)))
        } else {
            cluster
                .iter()
                .map(|u| info(u))
                .collect::<Result<_, _>>()
                .map(Target::Cluster)
        }
    }

    /// The target of the Redis directives: Sentinel mode when `ratelimit.redis_sentinel` is
    /// not empty (then `redis_url` gives only the master's password, database and TLS), else
    /// [`Target::parse`].
    pub fn from_config(r: &crate::core::config::RedisConfig) -> Result<Self, StoreError> {
        if r.sentinel.is_empty() {
            return Self::parse(&r.url, &r.cluster);
        }
        let refuse = |why: &str| StoreError::new(ErrorKind::Misconfigured, why.to_string());
        if !r.cluster.is_empty() {
            return Err(refuse(
                "ratelimit.redis_sentinel and ratelimit.redis_cluster are both set: set one",
            ));
        }
        if r.sentinel_master.is_empty() {
            return Err(refuse(
                "ratelimit.redis_sentinel is set but ratelimit.redis_sentinel_master is empty",
            ));
        }
        let settings = info(&r.url)?;
        let tls = matches!(settings.addr(), redis::ConnectionAddr::TcpTls { .. });
        let sentinels = r
            .sentinel
            .iter()
            .map(|s| {
                if s.contains("://") {
                    info(s)
                } else {
                    // host:port: TLS as the master's, no password of its own.
                    info(&format!("{}://{s}", if tls { "rediss" } else { "redis" }))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Target::Sentinel {
            sentinels,
            master: r.sentinel_master.clone(),
            settings: Box::new(settings),
        })
    }

    /// The address for messages and logs: host and port (or socket path), never a password.
    pub fn describe(&self) -> String {
        match self {
            Target::Single(i) => format!("redis {}", i.addr()),
            Target::Cluster(seeds) => {
                let addrs: Vec<String> = seeds.iter().map(|i| i.addr().to_string()).collect();
                format!("redis cluster {}", addrs.join(","))
            }
            Target::Sentinel {
                sentinels, master, ..
            } => {
                let addrs: Vec<String> = sentinels.iter().map(|i| i.addr().to_string()).collect();
                format!("redis sentinel {} master {master:?}", addrs.join(","))
            }
        }
    }
}

/// A URL without its user and password, for an error text.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// Where a call goes in a cluster: the master of a key's slot, or any master (a command without
/// keys, such as `TIME`). A single server takes every call.
#[derive(Clone, Copy)]
pub enum Route<'a> {
    Key(&'a str),
    Any,
}

/// A lazily made connection with a per-call time budget.
pub struct Conn {
    target: Target,
    timeout: Duration,
    servers: Servers,
    /// The deadline of the last call (see [`Conn::call_by`]).
    last_deadline: Option<Instant>,
}

// One per worker: the single server's node stays inline, on the path of every call.
#[allow(clippy::large_enum_variant)]
enum Servers {
    Single(Node),
    Cluster(Cluster),
    Sentinel(Sentinel),
}

impl Conn {
    /// Accepts a server whose `maxmemory-policy` evicts keys (see [`evicting_policy`]): the
    /// operator's explicit choice (`ratelimit.redis_allow_eviction`).
    pub fn allow_eviction(&mut self) {
        match &mut self.servers {
            Servers::Single(n) => n.check_policy = false,
            Servers::Cluster(c) => {
                c.check_policy = false;
                c.nodes.iter_mut().for_each(|n| n.check_policy = false);
            }
            Servers::Sentinel(s) => s.check_policy = false,
        }
    }

    pub fn new(target: Target, timeout: Duration) -> Self {
        let tls =
            |i: &redis::ConnectionInfo| matches!(i.addr(), redis::ConnectionAddr::TcpTls { .. });
        let uses_tls = match &target {
            Target::Single(i) => tls(i),
            Target::Cluster(seeds) => seeds.iter().any(tls),
            Target::Sentinel {
                sentinels,
                settings,
                ..
            } => tls(settings) || sentinels.iter().any(tls),
        };
        if uses_tls {
            super::link::prepare_tls();
        }
        let servers = match &target {
            Target::Single(info) => Servers::Single(Node::new((**info).clone())),
            Target::Cluster(seeds) => Servers::Cluster(Cluster::new(seeds)),
            Target::Sentinel {
                sentinels,
                master,
                settings,
            } => Servers::Sentinel(Sentinel::new(sentinels, master, settings)),
        };
        Self {
            target,
            timeout,
            servers,
            last_deadline: None,
        }
    }

    pub fn describe(&self) -> String {
        self.target.describe()
    }

    /// The master `key`'s calls go to, as this worker last knew the cluster, without asking the
    /// network: for a breaker per node. None for a single server, or before the cluster's map
    /// was first read.
    pub fn node_of(&self, key: &str) -> Option<String> {
        match &self.servers {
            Servers::Single(_) | Servers::Sentinel(_) => None,
            Servers::Cluster(c) => c.node_of(key),
        }
    }

    /// Whether [`Self::node_of`] can name a server (a cluster's masters).
    pub fn tells_nodes(&self) -> bool {
        matches!(self.servers, Servers::Cluster(_))
    }

    /// The budget of one call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The deadline a new call ends by. Each store call has a budget of its own: a budget kept
    /// for the call after a key check was tried, and a deny-cache answer in between left it to
    /// a later call, which then ran out of time after its script had taken a token.
    pub fn budget(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Runs `f` on the connection to `route`'s server within one time budget. Any error drops
    /// that connection. A cluster's redirection (MOVED, ASK: the command did not run) is followed
    /// once, to the node it names; nothing else is ever sent twice, since a call that timed out
    /// may have been carried out.
    pub fn call<T>(
        &mut self,
        route: Route,
        f: impl FnMut(&mut Link) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let deadline = self.budget();
        self.call_by(deadline, route, f)
    }

    /// The deadline of the last call: what is left of it is for work belonging to that call
    /// (the counts added after a decision), so that one store call spends one budget.
    pub fn last_deadline(&self) -> Option<Instant> {
        self.last_deadline
    }

    /// [`Conn::call`] ending by `deadline`.
    pub fn call_by<T>(
        &mut self,
        deadline: Instant,
        route: Route,
        mut f: impl FnMut(&mut Link) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        self.last_deadline = Some(deadline);
        let timeout = self.timeout;
        let r = match &mut self.servers {
            Servers::Single(node) => node.run(deadline, timeout, false, &mut f),
            Servers::Cluster(c) => c.call(route, deadline, timeout, &mut f),
            Servers::Sentinel(s) => s.call(deadline, timeout, &mut f),
        };
        r.map_err(|e| self.classify(e))
    }

    /// Every key matching `pattern` on every master: SCAN on the server, or on each master of
    /// the cluster (read from CLUSTER SLOTS), each master within a budget of its own.
    pub fn scan(&mut self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut scan_one = |c: &mut Link| {
            let mut keys = Vec::new();
            let mut cursor: u64 = 0;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query(c)?;
                keys.extend(batch);
                if next == 0 {
                    return Ok(keys);
                }
                cursor = next;
            }
        };
        let timeout = self.timeout;
        let r = match &mut self.servers {
            Servers::Single(node) => {
                node.run(Instant::now() + timeout, timeout, false, &mut scan_one)
            }
            Servers::Sentinel(s) => s.call(Instant::now() + timeout, timeout, &mut scan_one),
            Servers::Cluster(c) => (|| {
                c.read_slots(Instant::now() + timeout, timeout)?;
                let mut masters: Vec<usize> = c.slots.iter().map(|&(_, _, n)| n).collect();
                masters.sort_unstable();
                masters.dedup();
                let mut keys = Vec::new();
                for n in masters {
                    let deadline = Instant::now() + timeout;
                    keys.extend(c.nodes[n].run(deadline, timeout, false, &mut scan_one)?);
                }
                Ok(keys)
            })(),
        };
        r.map_err(|e| self.classify(e))
    }

    fn classify(&self, e: Fault) -> StoreError {
        let place = self.describe();
        match e {
            Fault::OutOfTime => {
                StoreError::new(ErrorKind::Timeout, format!("{place}: no answer in time"))
            }
            Fault::Redis(r) => {
                let kind = if matches!(r.code(), Some("RLCORRUPT" | "WRONGTYPE")) {
                    // A script found a value it did not write (see lua/bucket.lua), or a
                    // command met a value of another type at one of our names: damaged data,
                    // not a fault of the server.
                    ErrorKind::Corrupt
                } else if refuses_settings(&r) {
                    ErrorKind::Misconfigured
                } else if r.is_timeout() {
                    ErrorKind::Timeout
                } else if r.is_connection_refusal() || r.is_connection_dropped() || r.is_io_error()
                {
                    ErrorKind::Unreachable
                } else {
                    match r.kind() {
                        redis::ErrorKind::AuthenticationFailed
                        | redis::ErrorKind::InvalidClientConfig => ErrorKind::Misconfigured,
                        redis::ErrorKind::ClusterConnectionNotFound => ErrorKind::Unreachable,
                        redis::ErrorKind::Server(
                            redis::ServerErrorKind::ClusterDown
                            | redis::ServerErrorKind::TryAgain
                            | redis::ServerErrorKind::BusyLoading
                            | redis::ServerErrorKind::MasterDown
                            | redis::ServerErrorKind::Moved
                            | redis::ServerErrorKind::Ask,
                        ) => ErrorKind::Unreachable,
                        redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly) => {
                            ErrorKind::Unreachable
                        }
                        _ => ErrorKind::Io,
                    }
                };
                let what = match kind {
                    ErrorKind::Timeout => "no answer in time",
                    ErrorKind::Unreachable => "unreachable",
                    ErrorKind::Misconfigured => "cannot be used with these settings",
                    ErrorKind::Corrupt => "holds a damaged bucket",
                    _ => "failed",
                };
                StoreError::new(kind, format!("{place}: {what}")).with_source(r)
            }
        }
    }
}

/// Whether the server refused what the configuration asks of it, which no retry cures: a user
/// without the permission for a command (ACL `NOPERM`), or a database number it does not have
/// (`SELECT` at connect, which the redis crate reports as a refusal to switch database).
fn refuses_settings(r: &RedisError) -> bool {
    matches!(r.code(), Some("NOPERM" | "NOAUTH" | "WRONGPASS"))
        || r.to_string().contains("refused to switch database")
}

/// The server's `maxmemory-policy` when it evicts keys under memory pressure. Every bucket has
/// a time to live, so the `volatile-*` policies evict them as the `allkeys-*` ones do: only
/// `noeviction` keeps a limit from being silently reset (memory full is then an error, and so
/// a denial). Read from `INFO memory` (which managed services allow, unlike `CONFIG GET`); a
/// server that will not tell (no permission for INFO) is not refused for it.
fn evicting_policy(info: &str) -> Option<&str> {
    let policy = info
        .lines()
        .find_map(|l| l.strip_prefix("maxmemory_policy:"))?
        .trim();
    (policy != "noeviction").then_some(policy)
}

fn refuse_evicting_server(c: &mut dyn ConnectionLike) -> Result<(), RedisError> {
    let info: String = match redis::cmd("INFO").arg("memory").query(c) {
        Ok(i) => i,
        Err(e) if e.code() == Some("NOPERM") => return Ok(()),
        Err(e) => return Err(e),
    };
    match evicting_policy(&info) {
        None => Ok(()),
        Some(p) => Err(RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "the server evicts keys",
            format!(
                "maxmemory-policy is {p}: under memory pressure it would delete buckets and \
                 silently reset limits; set maxmemory-policy noeviction (a dedicated instance \
                 or database), or ratelimit.redis_allow_eviction=1 to accept it"
            ),
        ))),
    }
}

enum Fault {
    /// The budget ran out between steps.
    OutOfTime,
    Redis(RedisError),
}

/// What is left of a budget, or the fault of having none.
fn left(deadline: Instant) -> Result<Duration, Fault> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(Fault::OutOfTime)
}

/// One server's connection, made when first needed and dropped after any error.
struct Node {
    info: redis::ConnectionInfo,
    live: Option<Link>,
    /// Whether a new connection first makes sure the server does not evict keys.
    check_policy: bool,
    /// What the server is: a data node, or a Sentinel (no database, no policy to check).
    role: Role,
    /// Whether a new connection first makes sure the server is a master (ROLE): a master that
    /// Sentinels name may have been demoted since.
    check_master: bool,
}

impl Node {
    fn new(info: redis::ConnectionInfo) -> Self {
        Self {
            info,
            live: None,
            check_policy: true,
            role: Role::Data,
            check_master: false,
        }
    }

    /// Runs `f` on this server's connection within the budget (after `ASKING` when `asking`);
    /// an error drops the connection: a reply that timed out may still arrive, and must never be
    /// read as the answer to the next call.
    fn run<T>(
        &mut self,
        deadline: Instant,
        _timeout: Duration,
        asking: bool,
        f: &mut impl FnMut(&mut Link) -> Result<T, RedisError>,
    ) -> Result<T, Fault> {
        let r = self.connected(deadline).and_then(|c| {
            if asking {
                redis::cmd("ASKING").exec(c).map_err(Fault::Redis)?;
            }
            f(c).map_err(Fault::Redis)
        });
        if r.is_err() {
            self.live = None;
        }
        r
    }

    /// The connection, made now if there is none, its reads and writes bounded by `deadline`.
    fn connected(&mut self, deadline: Instant) -> Result<&mut Link, Fault> {
        left(deadline)?;
        let link = match &mut self.live {
            Some(link) => link,
            live @ None => {
                let mut c = Link::open(&self.info, self.role, deadline).map_err(Fault::Redis)?;
                if self.role == Role::Data && self.check_master {
                    refuse_replica(&mut c).map_err(Fault::Redis)?;
                }
                if self.role == Role::Data && self.check_policy {
                    refuse_evicting_server(&mut c).map_err(Fault::Redis)?;
                }
                live.insert(c)
            }
        };
        link.arm(deadline);
        Ok(link)
    }

    fn is_at(&self, host: &str, port: u16) -> bool {
        host_port(self.info.addr()) == Some((host, port))
    }
}

/// A `-READONLY` refusal: what a replica answers a write, and what a master found to be a
/// replica is treated as (the call did not run there).
fn read_only(why: &'static str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
        why,
    ))
}

fn is_read_only(r: &RedisError) -> bool {
    r.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

/// Fails unless the server says it is a master (ROLE's first field).
fn refuse_replica(c: &mut dyn ConnectionLike) -> Result<(), RedisError> {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(c)?;
    match role.first().map(redis::from_redis_value_ref::<String>) {
        Some(Ok(r)) if r == "master" => Ok(()),
        _ => Err(read_only("the server Sentinel named is not a master")),
    }
}

/// The master that Sentinels name, found within the calls' budgets. Asked for by name
/// (`SENTINEL GET-MASTER-ADDR-BY-NAME`) from one Sentinel after another, checked with ROLE when
/// connecting, and asked for again after a connection error, a `-READONLY` reply, or when it
/// was last named more than [`RECHECK`] ago (a failover whose old master still answers: its
/// writes would be lost).
struct Sentinel {
    name: String,
    sentinels: Vec<Node>,
    /// The Sentinel asked first: the last one that answered.
    cursor: usize,
    /// The master's settings (password, database, TLS); its address is the one found.
    settings: redis::ConnectionInfo,
    master: Option<Node>,
    /// When a Sentinel last named the master in use.
    named_at: Option<Instant>,
    check_policy: bool,
}

/// How long a master named by a Sentinel is used before one is asked again (at most one
/// Sentinel round trip a second per worker, within a call's budget).
pub const RECHECK: Duration = Duration::from_secs(1);

impl Sentinel {
    fn new(
        sentinels: &[redis::ConnectionInfo],
        name: &str,
        settings: &redis::ConnectionInfo,
    ) -> Self {
        let sentinels = sentinels
            .iter()
            .cloned()
            .map(|i| {
                let mut n = Node::new(i);
                n.role = Role::Sentinel;
                n
            })
            .collect();
        Self {
            name: name.to_string(),
            sentinels,
            cursor: 0,
            settings: settings.clone(),
            master: None,
            named_at: None,
            check_policy: true,
        }
    }

    fn call<T>(
        &mut self,
        deadline: Instant,
        timeout: Duration,
        f: &mut impl FnMut(&mut Link) -> Result<T, RedisError>,
    ) -> Result<T, Fault> {
        let due = self.named_at.is_none_or(|at| at.elapsed() >= RECHECK);
        if self.master.is_none() {
            self.discover(deadline, timeout, true)?;
        } else if due {
            // Half of what is left at most; a Sentinel that does not answer keeps the master
            // known (the next call asks the next Sentinel).
            let share = Instant::now() + left(deadline)? / 2;
            let _ = self.discover(share, timeout, false);
        }
        let master = self.master.as_mut().expect("found above");
        match master.run(deadline, timeout, false, f) {
            Ok(v) => Ok(v),
            Err(Fault::Redis(r)) if is_read_only(&r) => {
                // Refused, so not carried out: once more on the master named now, if any.
                self.forget();
                if left(deadline).is_err() {
                    return Err(Fault::Redis(r));
                }
                self.discover(deadline, timeout, true)?;
                let master = self.master.as_mut().expect("found above");
                let again = master.run(deadline, timeout, false, f);
                if again.is_err() {
                    self.forget();
                }
                again
            }
            Err(e) => {
                // Timed out or lost: whether it ran is unknown, so it is not sent again; the next
                // call asks the Sentinels anew.
                self.forget();
                Err(e)
            }
        }
    }

    fn forget(&mut self) {
        self.master = None;
        self.named_at = None;
    }

    /// Asks the Sentinels, one after another from the last that answered, for the master's
    /// address, and takes it (a connection to another address is dropped). A Sentinel that is
    /// not the last to try gets half of what is left. `all`: try every Sentinel, else only one.
    fn discover(&mut self, deadline: Instant, timeout: Duration, all: bool) -> Result<(), Fault> {
        let mut last = Fault::OutOfTime;
        let n = self.sentinels.len();
        let tries = if all { n } else { 1 };
        let (name, start) = (self.name.clone(), self.cursor);
        for i in 0..tries {
            let at = (start + i) % n;
            let share = if i + 1 < tries {
                Instant::now() + left(deadline)? / 2
            } else {
                deadline
            };
            let mut ask = |c: &mut Link| {
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&name)
                    .query::<Option<(String, u16)>>(c)
            };
            match self.sentinels[at].run(share, timeout, false, &mut ask) {
                Ok(Some((host, port))) => {
                    self.cursor = at;
                    self.take(&host, port);
                    return Ok(());
                }
                Ok(None) => {
                    last = Fault::Redis(RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "the Sentinel does not know the master named by ratelimit.redis_sentinel_master",
                    )));
                }
                Err(e) => last = e,
            }
            self.cursor = (at + 1) % n;
            if left(deadline).is_err() {
                break;
            }
        }
        Err(last)
    }

    /// Uses the master at `host:port` (with the master's settings), keeping the connection
    /// when it is the one in use.
    fn take(&mut self, host: &str, port: u16) {
        self.named_at = Some(Instant::now());
        if self.master.as_ref().is_some_and(|m| m.is_at(host, port)) {
            return;
        }
        let addr = match self.settings.addr() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => redis::ConnectionAddr::Tcp(host.to_string(), port),
        };
        let mut node = Node::new(self.settings.clone().set_addr(addr));
        node.check_policy = self.check_policy;
        node.check_master = true;
        self.master = Some(node);
    }
}

fn host_port(addr: &redis::ConnectionAddr) -> Option<(&str, u16)> {
    match addr {
        redis::ConnectionAddr::Tcp(h, p)
        | redis::ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => Some((h.as_str(), *p)),
        _ => None,
    }
}

/// A cluster seen by one worker: its slot map and a connection per master it has used. Our own
/// rather than the `redis` crate's, so that every step (reading the slots, connecting to a
/// master) spends the one call's budget: the crate's connects to every master at first use,
/// each with a fresh timeout, and with one master stopped a call took 220 ms of a 50 ms budget.
struct Cluster {
    /// Every node met: the seeds, then masters named by CLUSTER SLOTS.
    nodes: Vec<Node>,
    /// Slot ranges (first, last) and the index in `nodes` of their master; empty: to be read.
    slots: Vec<(u16, u16, usize)>,
    /// The map is to be read again before the next call (a call failed: the slots may have
    /// moved); until then it still says where a key's master was ([`Conn::node_of`]).
    stale: bool,
    /// Where the next reading of the slots starts: past a node that failed.
    cursor: usize,
    /// Given to the nodes met later (see [`Node::check_policy`]).
    check_policy: bool,
}

impl Cluster {
    fn new(seeds: &[redis::ConnectionInfo]) -> Self {
        Self {
            nodes: seeds.iter().cloned().map(Node::new).collect(),
            slots: Vec::new(),
            stale: false,
            cursor: 0,
            check_policy: true,
        }
    }

    fn call<T>(
        &mut self,
        route: Route,
        deadline: Instant,
        timeout: Duration,
        f: &mut impl FnMut(&mut Link) -> Result<T, RedisError>,
    ) -> Result<T, Fault> {
        if self.slots.is_empty() || self.stale {
            self.read_slots(deadline, timeout)?;
        }
        let at = self.master_of(route);
        let first = self.nodes[at].run(deadline, timeout, false, f);
        let e = match first {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        // Whatever failed, the slots may have moved (a failover, a resharding): read anew next,
        // from another node than this one.
        self.stale = true;
        if self.cursor == at {
            self.cursor = (at + 1) % self.nodes.len();
        }
        let redirect = match &e {
            // `MOVED <slot> <host>:<port>` (the crate gives the address and the slot).
            Fault::Redis(r) => r
                .redirect_node()
                .and_then(|(addr, _slot)| addr.rsplit_once(':'))
                .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
                .map(|(h, p)| {
                    let asking = r.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask);
                    (h, p, asking)
                }),
            Fault::OutOfTime => None,
        };
        match redirect {
            Some((host, port, asking)) if left(deadline).is_ok() => {
                let at = self.node_at(&host, port);
                self.nodes[at].run(deadline, timeout, asking, f)
            }
            _ => Err(e),
        }
    }

    /// The address of the master that served `key`'s slot when the map was last read.
    fn node_of(&self, key: &str) -> Option<String> {
        if self.slots.is_empty() {
            return None;
        }
        Some(
            self.nodes[self.master_of(Route::Key(key))]
                .info
                .addr()
                .to_string(),
        )
    }

    /// The index of the master serving `route` (the map is not empty).
    fn master_of(&self, route: Route) -> usize {
        let Route::Key(key) = route else {
            return self.slots[0].2;
        };
        let slot = slot(key.as_bytes());
        self.slots
            .iter()
            .find(|&&(a, b, _)| (a..=b).contains(&slot))
            .map_or(self.slots[0].2, |&(_, _, n)| n)
    }

    /// Reads the slot map from the first node that answers, starting at `cursor`. A node that
    /// is not the last to try gets half of what is left: a stopped seed (a new worker asks the
    /// first seed first) must leave time to ask another and make the call.
    fn read_slots(&mut self, deadline: Instant, timeout: Duration) -> Result<(), Fault> {
        let mut last = Fault::OutOfTime;
        let (n, start) = (self.nodes.len(), self.cursor);
        for i in 0..n {
            let at = (start + i) % n;
            let mut ask = |c: &mut Link| redis::cmd("CLUSTER").arg("SLOTS").query(c);
            let share = if i + 1 < n {
                Instant::now() + left(deadline)? / 2
            } else {
                deadline
            };
            match self.nodes[at].run(share, timeout, false, &mut ask) {
                Ok(v) => {
                    let asked = host_port(self.nodes[at].info.addr())
                        .map(|(h, _)| h.to_string())
                        .unwrap_or_default();
                    let mut slots = Vec::new();
                    for (a, b, host, port) in parse_slots(&v) {
                        let host = if host.is_empty() || host == "?" {
                            asked.clone()
                        } else {
                            host
                        };
                        slots.push((a, b, self.node_at(&host, port)));
                    }
                    if slots.is_empty() {
                        return Err(Fault::Redis(RedisError::from((
                            redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
                            "CLUSTER SLOTS named no master",
                        ))));
                    }
                    self.slots = slots;
                    self.stale = false;
                    self.cursor = at;
                    return Ok(());
                }
                Err(e) => {
                    self.cursor = (at + 1) % n;
                    last = e;
                    if left(deadline).is_err() {
                        break;
                    }
                }
            }
        }
        Err(last)
    }

    /// The index of the node at `host:port`, added (with the seeds' settings: TLS, password)
    /// when new.
    fn node_at(&mut self, host: &str, port: u16) -> usize {
        if let Some(i) = self.nodes.iter().position(|n| n.is_at(host, port)) {
            return i;
        }
        let seed = &self.nodes[0].info;
        let addr = match seed.addr() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => redis::ConnectionAddr::Tcp(host.to_string(), port),
        };
        let info = seed.clone().set_addr(addr);
        let mut node = Node::new(info);
        node.check_policy = self.check_policy;
        self.nodes.push(node);
        self.nodes.len() - 1
    }
}

/// The ranges of a CLUSTER SLOTS reply: (first slot, last slot, master host, master port).
fn parse_slots(v: &redis::Value) -> Vec<(u16, u16, String, u16)> {
    let redis::Value::Array(ranges) = v else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| {
            let redis::Value::Array(r) = range else {
                return None;
            };
            let a: u16 = redis::from_redis_value_ref(r.first()?).ok()?;
            let b: u16 = redis::from_redis_value_ref(r.get(1)?).ok()?;
            let redis::Value::Array(node) = r.get(2)? else {
                return None;
            };
            let host: String = redis::from_redis_value_ref(node.first()?).ok()?;
            let port: u16 = redis::from_redis_value_ref(node.get(1)?).ok()?;
            Some((a, b, host, port))
        })
        .collect()
}

/// The cluster slot of a key: CRC16 (XMODEM) of its hash tag (the first non-empty `{...}`), or
/// of the whole key, modulo 16384.
fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|t| !t.is_empty());
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[cfg(test)]
mod tests {
    use super::evicting_policy;

    #[test]
    fn only_noeviction_keeps_every_bucket() {
        let info = |p: &str| format!("# Memory\r\nused_memory:1\r\nmaxmemory_policy:{p}\r\n");
        assert_eq!(evicting_policy(&info("noeviction")), None);
        for p in [
            "allkeys-lru",
            "volatile-lru",
            "volatile-ttl",
            "allkeys-random",
            "volatile-lfu",
        ] {
            assert_eq!(evicting_policy(&info(p)), Some(p));
        }
        assert_eq!(
            evicting_policy("# Memory\r\n"),
            None,
            "not told: not refused"
        );
    }

    use super::*;

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(
            without_credentials("redis://user:s3cret@10.0.0.1:6379/0"),
            "redis://10.0.0.1:6379/0"
        );
        let t = Target::parse("redis://user:s3cret@10.0.0.1:6379/0", &[]).unwrap();
        assert!(!t.describe().contains("s3cret"), "{}", t.describe());
        let e = Target::parse("redis://user:s3cret@", &[]);
        if let Err(e) = e {
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn a_refused_connection_is_unreachable_within_the_budget() {
        // Port 1 on loopback: nothing listens there.
        let t = Target::parse("redis://127.0.0.1:1/0", &[]).unwrap();
        let mut c = Conn::new(t, Duration::from_millis(50));
        let t0 = Instant::now();
        let e = c
            .call(Route::Any, |c| redis::cmd("PING").query::<String>(c))
            .unwrap_err();
        assert!(t0.elapsed() < Duration::from_millis(500));
        assert_eq!(e.kind(), ErrorKind::Unreachable, "{e}");
    }

    #[test]
    fn a_key_slot_is_redis_own() {
        // CLUSTER KEYSLOT on Redis 7.0: foo 12182, bar 5061, 123456789 12739.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"123456789"), 12739);
    }

    #[test]
    fn a_hash_tag_decides_the_slot() {
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"rl:{ab12}b:ff"), slot(b"rl:{ab12}l:00"));
        // The first `{` with a `}` after it; an empty tag hashes the whole key.
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
    }

    /// A server that accepts connections and never answers: to a client, what a SIGSTOPped
    /// Redis is (the kernel still completes the handshake).
    fn silent_server() -> (std::net::TcpListener, u16) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        (l, port)
    }

    /// A fault injector, not a Redis: answers every command it reads with a reply of 200 bytes
    /// (a bulk string), one byte every `gap`.
    fn trickling_peer(gap: Duration) -> u16 {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut reply = b"$200\r\n".to_vec();
                    reply.extend([b'x'; 200]);
                    reply.extend(b"\r\n");
                    while matches!(s.read(&mut buf), Ok(n) if n > 0) {
                        for b in &reply {
                            if s.write_all(&[*b]).is_err() {
                                return;
                            }
                            std::thread::sleep(gap);
                        }
                    }
                });
            }
        });
        port
    }

    /// Whatever step the trickle meets (AUTH and SELECT at connect, the eviction check, the
    /// command), a call ends within its budget, and the next call too.
    #[test]
    fn a_reply_trickling_in_at_any_step_ends_the_call_within_its_budget() {
        let port = trickling_peer(Duration::from_millis(10));
        for url in [
            format!("redis://127.0.0.1:{port}/0"),
            format!("redis://:secret@127.0.0.1:{port}/3"),
        ] {
            let mut c = Conn::new(Target::parse(&url, &[]).unwrap(), Duration::from_millis(50));
            for _ in 0..3 {
                let t0 = Instant::now();
                let e = c
                    .call(Route::Any, |c| redis::cmd("PING").query::<String>(c))
                    .unwrap_err();
                let took = t0.elapsed();
                assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
                // 50 to 51 ms on an idle machine; a reply takes 2 s. The margin is for a
                // machine so loaded that the test's thread waits to be scheduled.
                assert!(
                    took >= Duration::from_millis(50) && took < Duration::from_millis(150),
                    "{took:?}"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(
        not(feature = "redis-servers"),
        ignore = "needs the cluster of scripts/redis: --features redis-servers (./run-tests 1)"
    )]
    fn a_moved_reply_is_followed_once_to_the_node_it_names() {
        let seeds: Vec<String> = std::env::var("RL_REDIS_CLUSTER")
            .expect("RL_REDIS_CLUSTER is not set: start a cluster with `scripts/redis start cluster DIR` (./run-tests does)")
            .split(',')
            .map(str::to_string)
            .collect();
        let mut c = Conn::new(Target::parse("", &seeds).unwrap(), Duration::from_secs(2));
        let get = |c: &mut Link| {
            redis::cmd("GET")
                .arg("rl-moved-test")
                .query::<Option<String>>(c)
        };
        c.call(Route::Key("rl-moved-test"), get).unwrap();
        let Servers::Cluster(cl) = &mut c.servers else {
            unreachable!()
        };
        // A stale map: every range sent to the next master.
        let mut masters: Vec<usize> = cl.slots.iter().map(|r| r.2).collect();
        masters.sort_unstable();
        masters.dedup();
        assert_eq!(masters.len(), 3, "{:?}", cl.slots);
        for r in &mut cl.slots {
            let i = masters.iter().position(|&m| m == r.2).unwrap();
            r.2 = masters[(i + 1) % 3];
        }
        c.call(Route::Key("rl-moved-test"), get).unwrap();
        let Servers::Cluster(cl) = &c.servers else {
            unreachable!()
        };
        assert!(cl.stale, "a redirection makes the map be read again");
    }

    #[test]
    fn a_silent_cluster_seed_leaves_half_the_budget_to_ask_the_next() {
        let (_l, port) = silent_server();
        let seeds = [
            format!("redis://127.0.0.1:{port}"),
            "redis://127.0.0.1:1".into(),
        ];
        let t = Target::parse("", &seeds).unwrap();
        let mut c = Conn::new(t, Duration::from_millis(400));
        let t0 = Instant::now();
        let e = c
            .call(Route::Key("k"), |c| {
                redis::cmd("GET").arg("k").query::<Option<String>>(c)
            })
            .unwrap_err();
        let took = t0.elapsed();
        // The refusal of the second seed (port 1) is the answer, after half the budget.
        assert_eq!(e.kind(), ErrorKind::Unreachable, "{e}");
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_millis(400),
            "{took:?}"
        );
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    /// A fault injector, not a Redis: answers every command `+OK`, each `delay` after it came.
    fn slow_peer(delay: Duration) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut r = BufReader::new(s.try_clone().unwrap());
                std::thread::spawn(move || loop {
                    // One RESP array of bulk strings: *N, then N times $len and the bytes.
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
                    for _ in 0..2 * n {
                        line.clear();
                        let _ = r.read_line(&mut line);
                    }
                    std::thread::sleep(delay);
                    if s.write_all(b"+OK\r\n").is_err() {
                        return;
                    }
                });
            }
        });
        port
    }

    fn conn(port: u16) -> Conn {
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("redis://127.0.0.1:{port}/0"))
                .unwrap();
        let mut c = Conn::new(Target::Single(Box::new(info)), Duration::from_millis(50));
        c.allow_eviction();
        c
    }

    fn ping(c: &mut Link) -> Result<String, RedisError> {
        redis::cmd("PING").query(c)
    }

    #[test]
    fn each_call_has_a_budget_of_its_own() {
        let mut c = conn(slow_peer(Duration::from_millis(30)));
        assert_eq!(c.call(Route::Any, ping).unwrap(), "OK");
        assert_eq!(c.call(Route::Any, ping).unwrap(), "OK");
    }
}
