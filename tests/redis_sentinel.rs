//! The Redis store in Sentinel mode against real processes this file starts (and kills on
//! drop): a master, its replica and a Sentinel watching them (`redis-server --sentinel`, what
//! Debian's redis-sentinel runs). A failover moves the decisions to the promoted node; a
//! Sentinel that is down or silent is passed over within the budget; a master name the
//! Sentinels do not know is a misconfiguration. Behind the `redis-servers` feature, as every
//! test that needs `redis-server` (`./run-tests 1` turns it on).

#![cfg(feature = "redis-servers")]

mod conformance;
mod servers;

use conformance::{ask, key, none};
use ratelimit::core::config::RedisConfig;
use ratelimit::opslog::OpsLog;
use ratelimit::storage::redis::{RedisSettings, RedisStore, Target};
use ratelimit::storage::{system_clock, ErrorKind, Store};
use servers::{cli, free_port};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Processes killed on drop.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A master, a replica and one Sentinel (quorum 1) on loopback, in `dir`.
struct Site {
    master: u16,
    replica: u16,
    sentinel: u16,
    _procs: Procs,
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Site {
    /// `failover`: wait until the Sentinel knows the replica too (it asks the master every
    /// 10 s), which a failover needs.
    fn start(dir: &std::path::Path, failover: bool) -> Self {
        let (master, replica, sentinel) = (free_port(), free_port(), free_port());
        let mut procs = Procs(Vec::new());
        let server = |port: u16, extra: &[String]| {
            Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--port")
                .arg(port.to_string())
                .arg("--dir")
                .arg(dir)
                .args(extra)
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server (scripts/install-deps installs it)")
        };
        procs.0.push(server(master, &[]));
        procs.0.push(server(
            replica,
            &["--replicaof".into(), "127.0.0.1".into(), master.to_string()],
        ));
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {sentinel}\nbind 127.0.0.1\ndir {}\nsentinel monitor m 127.0.0.1 {master} 1\n\
                 sentinel down-after-milliseconds m 1000\nsentinel failover-timeout m 5000\n",
                dir.display()
            ),
        )
        .unwrap();
        procs.0.push(
            Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server --sentinel"),
        );
        let site = Site {
            master,
            replica,
            sentinel,
            _procs: procs,
        };
        wait_until("the replica in sync", || {
            matches!(cli(replica, &["INFO", "replication"]),
                Ok(redis::Value::BulkString(b)) if String::from_utf8_lossy(&b).contains("master_link_status:up"))
        });
        wait_until("the Sentinel sees the replica", || {
            !failover
                || matches!(cli(sentinel, &["SENTINEL", "REPLICAS", "m"]),
                Ok(redis::Value::Array(a)) if !a.is_empty())
        });
        site
    }

    fn master_port(&self) -> Option<u16> {
        let v = cli(self.sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m"]).ok()?;
        let (_, port): (String, u16) = redis::from_redis_value(v).ok()?;
        Some(port)
    }
}

fn store(sentinels: &[String], master: &str, timeout_ms: u64) -> RedisStore {
    let config = RedisConfig {
        url: "redis://ignored:1/0".into(),
        sentinel: sentinels.to_vec(),
        sentinel_master: master.into(),
        ..RedisConfig::default()
    };
    let settings = RedisSettings {
        target: Target::from_config(&config).unwrap(),
        prefix: "rl:".into(),
        timeout_ms,
        flush_ms: 1_000,
    };
    RedisStore::new(settings, None, system_clock(), OpsLog::none())
}

fn dbsize(port: u16) -> i64 {
    redis::from_redis_value(cli(port, &["DBSIZE"]).unwrap()).unwrap()
}

#[test]
fn decisions_follow_the_master_through_a_failover() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start(dir.path(), true);
    let mut s = store(&[format!("127.0.0.1:{}", site.sentinel)], "m", 200);
    let a = ask(1_000, 86_400_000, 0);
    assert!(
        s.acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .allowed
    );
    assert!(dbsize(site.master) > 0, "written on the master");
    wait_until("the write replicated", || dbsize(site.replica) > 0);
    // Refused (NOGOODSLAVE) until the Sentinel has heard from the replica lately.
    wait_until("the failover accepted", || {
        cli(site.sentinel, &["SENTINEL", "FAILOVER", "m"]).is_ok()
    });
    wait_until("the Sentinel names the replica", || {
        site.master_port() == Some(site.replica)
    });
    // Past RECHECK, the store asks a Sentinel again before its next call: every decision from
    // now on is made on the promoted node (before that, one could land on the old master while
    // it still answered as one, and be lost: the over-admission php-tests/sentinel/run bounds).
    std::thread::sleep(Duration::from_millis(1_100));
    // Every call an answer or a transient fault, and answers within a few seconds.
    let t0 = Instant::now();
    let (mut unavailable, mut decided) = (0, 0);
    while decided < 3 {
        match s.acquire(&key(1), &a, 60_000, &mut none()) {
            Ok(d) => {
                assert!(d.verdict.allowed);
                decided += 1;
            }
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                unavailable += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{unavailable} unavailable"
        );
    }
    let role: Vec<redis::Value> =
        redis::from_redis_value(cli(site.replica, &["ROLE"]).unwrap()).unwrap();
    assert_eq!(
        redis::from_redis_value_ref::<String>(&role[0]).unwrap(),
        "master"
    );
    // The bucket on the promoted node holds the 4 admissions (1 before, 3 after).
    let v: String =
        redis::from_redis_value(cli(site.replica, &["GET", &keys_of(site.replica)[0]]).unwrap())
            .unwrap();
    assert_eq!(v.split(' ').nth(4), Some("4"), "{v}");
}

fn keys_of(port: u16) -> Vec<String> {
    redis::from_redis_value(cli(port, &["KEYS", "rl:*b:*"]).unwrap()).unwrap()
}

#[test]
fn a_sentinel_down_or_silent_is_passed_over_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start(dir.path(), false);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let good = format!("127.0.0.1:{}", site.sentinel);
    for list in [
        vec!["127.0.0.1:1".to_string(), good.clone()],
        vec![silent, good],
    ] {
        let mut s = store(&list, "m", 200);
        let t0 = Instant::now();
        let d = s.acquire(&key(2), &ask(1_000, 86_400_000, 0), 60_000, &mut none());
        let took = t0.elapsed();
        assert!(d.unwrap().verdict.allowed, "{list:?}");
        // Within the budget (200 ms), with a margin for a loaded machine.
        assert!(took < Duration::from_millis(300), "{took:?} {list:?}");
    }
}

#[test]
fn a_master_name_no_sentinel_knows_is_a_misconfiguration() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start(dir.path(), false);
    let mut s = store(&[format!("127.0.0.1:{}", site.sentinel)], "nope", 200);
    for _ in 0..3 {
        let e = s
            .acquire(&key(3), &ask(5, 1_000, 0), 60_000, &mut none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    }
}

#[test]
fn sentinel_settings_that_cannot_work_are_refused() {
    let base = RedisConfig {
        url: "redis://127.0.0.1:6379/0".into(),
        sentinel: vec!["127.0.0.1:26379".into()],
        ..RedisConfig::default()
    };
    let e = Target::from_config(&base).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misconfigured);
    assert!(e.to_string().contains("redis_sentinel_master"), "{e}");
    let both = RedisConfig {
        sentinel_master: "m".into(),
        cluster: vec!["redis://127.0.0.1:7000".into()],
        ..base
    };
    let e = Target::from_config(&both).unwrap_err();
    assert!(e.to_string().contains("both set"), "{e}");
}
