//! The conformance suite on every store stack exactly as [`ratelimit::stack`] builds it for a
//! php.ini (its layers in their order): SQLite behind the worker's deny cache; Redis behind the
//! deny cache and the failover layer (the host's breaker), without and with the local fallback.
//! The Redis stacks need the servers of `scripts/redis` and the `redis-servers` feature
//! (`./run-tests 1`).

mod conformance;

use conformance::Backend;
use ratelimit::core::bucket::Policy;
use ratelimit::core::config::Config;
use ratelimit::core::counters::Counters;
use ratelimit::core::decision::{Ask, Verdict};
use ratelimit::core::lease::LeaseToken;
use ratelimit::core::subject::BucketKey;
use ratelimit::opslog::OpsLog;
use ratelimit::stack::{self, Clocks};
use ratelimit::storage::{Acquired, AcquiredAll, Clock, Query, Reply, Store, StoreError, StoreExt};
use std::path::PathBuf;

/// A php.ini's stack on a host of its own (a fresh directory for its SQLite file, the breaker
/// file and the local fallback).
struct Stack {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: Config,
}

impl Stack {
    /// `settings`: php.ini lines (name, value) over the defaults.
    fn new(settings: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        let mut config = Config::defaults();
        config
            .set("ratelimit.db_path", db.to_str().unwrap())
            .unwrap();
        for (name, value) in settings {
            config.set(name, value).unwrap();
        }
        Self {
            _dir: dir,
            db,
            config,
        }
    }
}

impl Backend for Stack {
    type S = Held;
    fn open(&self, clock: Clock) -> Held {
        let stack = stack::store(
            &self.config,
            &self.db,
            &Clocks::manual(clock),
            &OpsLog::none(),
        )
        .unwrap();
        Held {
            stack,
            carry: Counters::ZERO,
        }
    }
}

/// A stack as a worker's limiter holds it: the counts not written yet (a deny cache's denials,
/// a failed call's) carried from call to call, shown with the stats, and written at the end
/// (the limiter's `unwritten` and its `shutdown`).
struct Held {
    stack: Box<dyn Store>,
    carry: Counters,
}

impl Held {
    /// The caller's counts join those held; `f` runs with them all.
    fn with<T>(
        &mut self,
        carry: &mut Counters,
        f: impl FnOnce(&mut dyn Store, &mut Counters) -> T,
    ) -> T {
        self.carry.add(&std::mem::take(carry));
        f(self.stack.as_mut(), &mut self.carry)
    }
}

impl Store for Held {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        self.with(carry, |s, c| s.acquire(key, ask, lease_ttl_ms, c))
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        self.with(carry, |s, c| s.acquire_all(keys, asks, lease_ttl_ms, c))
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<Verdict, StoreError> {
        self.with(carry, |s, c| s.peek(key, policy, c))
    }

    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        self.with(carry, |s, c| s.release(leases, c))
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        self.with(carry, |s, c| s.reset(key, c))
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        let r = self.with(carry, |s, c| s.serve(q, c));
        match r {
            Ok(Reply::Stats(mut st)) => {
                st.counters.add(&self.carry);
                Ok(Reply::Stats(st))
            }
            other => other,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.stack.flush(&mut self.carry);
    }
}

mod sqlite {
    use super::conformance;
    crate::conformance_suite!(super::Stack::new(&[]));
}

#[cfg(feature = "redis-servers")]
mod redis {
    use super::Stack;

    fn env(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: start servers with `scripts/redis start single|cluster DIR` (./run-tests 1 does)")
        })
    }

    /// A prefix no other test uses, so that tests share a server without sharing keys.
    fn prefix() -> String {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("rlstack:{}:{n}:", std::process::id())
    }

    /// The Redis backend's stack on the single server, with `fallback` (none or local).
    pub fn single(fallback: &str) -> Stack {
        let (url, prefix) = (env("RL_REDIS_URL"), prefix());
        Stack::new(&[
            ("ratelimit.backend", "redis"),
            ("ratelimit.redis_url", &url),
            ("ratelimit.redis_prefix", &prefix),
            ("ratelimit.redis_timeout_ms", "2000"),
            ("ratelimit.redis_fallback", fallback),
        ])
    }

    /// The Redis backend's stack on the 3-master cluster.
    pub fn cluster(fallback: &str) -> Stack {
        let (seeds, prefix) = (env("RL_REDIS_CLUSTER"), prefix());
        Stack::new(&[
            ("ratelimit.backend", "redis"),
            ("ratelimit.redis_cluster", &seeds),
            ("ratelimit.redis_prefix", &prefix),
            ("ratelimit.redis_timeout_ms", "2000"),
            ("ratelimit.redis_fallback", fallback),
        ])
    }

    mod single_breaker {
        use crate::conformance;
        crate::conformance_suite!(super::single("none"));
    }

    mod single_local_fallback {
        use crate::conformance;
        crate::conformance_suite!(super::single("local"));
    }

    mod cluster_local_fallback {
        use crate::conformance;
        crate::conformance_suite!(super::cluster("local"));
    }
}
