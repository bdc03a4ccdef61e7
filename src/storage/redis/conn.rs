//! One worker's connection to Redis (a single server or a cluster): made on first use, never in
//! module startup, dropped after any error (a reply that timed out may still arrive, and must
//! never be read as the answer to the next call), and made again by the next call. Every call
//! waits at most the configured timeout in all: connecting, writing and reading share it.

use crate::storage::{ErrorKind, StoreError};
use redis::{ConnectionLike, IntoConnectionInfo, RedisError};
use std::time::{Duration, Instant};

/// Where to connect.
#[derive(Debug, Clone)]
pub enum Target {
    Single(Box<redis::ConnectionInfo>),
    /// Seed nodes of a cluster.
    Cluster(Vec<redis::ConnectionInfo>),
}

impl Target {
    /// Parses `ratelimit.redis_url`, or the seeds of `ratelimit.redis_cluster` when not empty.
    pub fn parse(url: &str, cluster: &[String]) -> Result<Self, StoreError> {
        let info = |u: &str| {
            u.into_connection_info()
                .map(|i| {
                    // One round trip less when connecting: no CLIENT SETINFO.
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
        };
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

    /// The address for messages and logs: host and port (or socket path), never a password.
    pub fn describe(&self) -> String {
        match self {
            Target::Single(i) => format!("redis {}", i.addr()),
            Target::Cluster(seeds) => {
                let addrs: Vec<String> = seeds.iter().map(|i| i.addr().to_string()).collect();
                format!("redis cluster {}", addrs.join(","))
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

enum Live {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

/// A lazily made connection with a per-call time budget.
pub struct Conn {
    target: Target,
    timeout: Duration,
    live: Option<Live>,
    /// The read and write timeouts set on `live` now (a system call to change).
    io_timeout: Option<Duration>,
}

impl Conn {
    pub fn new(target: Target, timeout: Duration) -> Self {
        Self {
            target,
            timeout,
            live: None,
            io_timeout: None,
        }
    }

    pub fn describe(&self) -> String {
        self.target.describe()
    }

    /// Runs `f` on the connection within one time budget. Any error drops the connection. A
    /// cluster's redirection (MOVED, ASK: the command did not run) is followed once, on a new
    /// connection that reads the slots afresh; nothing else is ever sent twice, since a call
    /// that timed out may have been carried out.
    pub fn call<T>(
        &mut self,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let deadline = Instant::now() + self.timeout;
        let mut redirected = false;
        loop {
            let result = self
                .connected(deadline)
                .and_then(|c| f(c).map_err(Fault::Redis));
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    self.live = None;
                    let moved = matches!(&e, Fault::Redis(r) if matches!(
                        r.kind(),
                        redis::ErrorKind::Server(redis::ServerErrorKind::Moved)
                            | redis::ErrorKind::Server(redis::ServerErrorKind::Ask)
                    ));
                    if moved && !redirected && Instant::now() < deadline {
                        redirected = true;
                        continue;
                    }
                    return Err(self.classify(e));
                }
            }
        }
    }

    /// The live connection, made now if there is none, with its read and write timeouts set to
    /// what is left of the budget.
    fn connected(&mut self, deadline: Instant) -> Result<&mut dyn ConnectionLike, Fault> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(Fault::OutOfTime)?;
        if self.live.is_none() {
            self.live = Some(match &self.target {
                Target::Single(info) => {
                    let client = redis::Client::open((**info).clone()).map_err(Fault::Redis)?;
                    Live::Single(
                        client
                            .get_connection_with_timeout(left)
                            .map_err(Fault::Redis)?,
                    )
                }
                Target::Cluster(seeds) => {
                    // No retries inside the client: a timed-out script must not be sent again.
                    let client = redis::cluster::ClusterClientBuilder::new(seeds.clone())
                        .retries(0)
                        .connection_timeout(left)
                        .response_timeout(self.timeout)
                        .build()
                        .map_err(Fault::Redis)?;
                    Live::Cluster(Box::new(client.get_connection().map_err(Fault::Redis)?))
                }
            });
            self.io_timeout = None;
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(Fault::OutOfTime)?;
        let live = self.live.as_mut().expect("made above");
        if let Live::Single(c) = live {
            // Only what is left of this call's budget; a kept connection gets the whole timeout
            // (within a millisecond, to spare a system call per call).
            let want = if left + Duration::from_millis(1) >= self.timeout {
                self.timeout
            } else {
                left
            };
            if self.io_timeout != Some(want) {
                c.set_read_timeout(Some(want)).map_err(Fault::Redis)?;
                c.set_write_timeout(Some(want)).map_err(Fault::Redis)?;
                self.io_timeout = Some(want);
            }
        }
        Ok(match live {
            Live::Single(c) => c,
            Live::Cluster(c) => &mut **c,
        })
    }

    /// Every key matching `pattern` on every master: SCAN on the server, or on each master of
    /// the cluster (found with CLUSTER SLOTS) through a connection of its own.
    pub fn scan(&mut self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let scan_one = |c: &mut dyn ConnectionLike| {
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
        let seed = match &self.target {
            Target::Single(_) => return self.call(scan_one),
            Target::Cluster(seeds) => seeds[0].clone(),
        };
        let slots: Vec<redis::Value> =
            self.call(|c| redis::cmd("CLUSTER").arg("SLOTS").query(c))?;
        let mut masters: Vec<(String, u16)> = slots
            .iter()
            .filter_map(|range| match range {
                redis::Value::Array(r) => match r.get(2) {
                    Some(redis::Value::Array(node)) => {
                        let host: String = redis::from_redis_value_ref(node.first()?).ok()?;
                        let port: u16 = redis::from_redis_value_ref(node.get(1)?).ok()?;
                        Some((host, port))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        masters.sort();
        masters.dedup();
        let mut keys = Vec::new();
        for (host, port) in masters {
            let addr = match seed.addr() {
                redis::ConnectionAddr::TcpTls {
                    insecure,
                    tls_params,
                    ..
                } => redis::ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: *insecure,
                    tls_params: tls_params.clone(),
                },
                _ => redis::ConnectionAddr::Tcp(host, port),
            };
            let mut one = Conn::new(
                Target::Single(Box::new(seed.clone().set_addr(addr))),
                self.timeout,
            );
            keys.extend(one.call(scan_one)?);
        }
        Ok(keys)
    }

    fn classify(&self, e: Fault) -> StoreError {
        let place = self.describe();
        match e {
            Fault::OutOfTime => {
                StoreError::new(ErrorKind::Timeout, format!("{place}: no answer in time"))
            }
            Fault::Redis(r) => {
                let kind = if r.code() == Some("RLCORRUPT") {
                    // A script found a value it did not write (see lua/bucket.lua).
                    ErrorKind::Corrupt
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
                    ErrorKind::Misconfigured => "refused the connection settings",
                    ErrorKind::Corrupt => "holds a damaged bucket",
                    _ => "failed",
                };
                StoreError::new(kind, format!("{place}: {what}")).with_source(r)
            }
        }
    }
}

enum Fault {
    /// The budget ran out between steps.
    OutOfTime,
    Redis(RedisError),
}

#[cfg(test)]
mod tests {
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
            .call(|c| redis::cmd("PING").query::<String>(c))
            .unwrap_err();
        assert!(t0.elapsed() < Duration::from_millis(500));
        assert_eq!(e.kind(), ErrorKind::Unreachable, "{e}");
    }
}
