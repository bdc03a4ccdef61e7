//! Where an admission's cost goes, from SQLite's own counters (issue 24): six stores (as six
//! php-fpm workers) on one file take turns, so that every call follows another connection's
//! commit, as in a pool. Not a timed test: it prints, it asserts nothing about speed.
//!
//!   RL_PROBE=base,index cargo test --release --no-default-features --lib probe -- --ignored --nocapture
//!
//! Variants (RL_PROBE, comma-separated; default base): `base`; `index`, with the recency index
//! files had before issue 24; `nockpt`, no checkpoint; `pageN`, a file of N-byte pages.

use super::*;
use crate::core::bucket::Policy;
use std::time::Instant;

/// SQLite's per-connection counter `op` (SQLITE_DBSTATUS_*), reset after reading.
fn status(conn: &Connection, op: i32) -> i64 {
    let (mut cur, mut hi) = (0, 0);
    // SAFETY: the handle is a live connection owned by `conn` for this whole call, and
    // sqlite3_db_status only writes the two integers passed to it.
    unsafe { rusqlite::ffi::sqlite3_db_status(conn.handle(), op, &mut cur, &mut hi, 1) };
    i64::from(cur)
}

/// This thread's CPU time (user + system) so far, in us.
fn cpu_us() -> f64 {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the struct it is given, which lives here.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    (u.ru_utime.tv_sec + u.ru_stime.tv_sec) as f64 * 1e6
        + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) as f64
}

fn run(subjects: u32, calls: u32, variant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    if let Some(size) = variant.strip_prefix("page") {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&format!("PRAGMA page_size={size}; CREATE TABLE x(y)"))
            .unwrap();
    }
    // One millisecond a call, as at 1,000 admissions a second: a subject of 1,000 comes back
    // a second later (past the 100 ms of recency kept, so its `used_at` moves).
    let ms = Arc::new(std::sync::atomic::AtomicI64::new(1_700_000_000_000));
    let tick = Arc::clone(&ms);
    let clock: Clock = Arc::new(move || tick.load(std::sync::atomic::Ordering::Relaxed));
    let mut stores: Vec<SqliteStore> = (0..6)
        .map(|_| SqliteStore::open(&path, 5_000, 100_000, clock.clone()).unwrap())
        .collect();
    let ask = Ask::new(Policy::new(1_000_000_000, 1_000).unwrap(), 1, 0);
    let key = |i: u32| {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
        BucketKey {
            bucket: b,
            group: [2; 16],
            previous: None,
        }
    };
    if variant == "index" {
        // The recency index that files had before issue 24 (see evict.rs).
        let c = stores[0].connection().unwrap();
        c.execute_batch("CREATE INDEX buckets_used_at ON buckets(used_at)")
            .unwrap();
    }
    if variant == "nockpt" {
        for s in &mut stores {
            s.checkpoint_backoff_until = Some(Instant::now() + Duration::from_secs(3600));
        }
    }
    // Warm-up: every subject stored, every store past its first (snapshot) call.
    for i in 0..subjects.max(60) {
        ms.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let s = &mut stores[(i % 6) as usize];
        s.acquire(&key(i % subjects), &ask, 60_000, &mut Counters::default())
            .unwrap();
    }
    for s in &stores {
        let c = s.conn.as_ref().unwrap();
        for op in 0..13 {
            status(c, op);
        }
    }
    let frames0 = std::fs::metadata(path.with_extension("sqlite-wal")).map_or(0, |m| m.len());
    let t = Instant::now();
    let c0 = cpu_us();
    for i in 0..calls {
        ms.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let s = &mut stores[(i % 6) as usize];
        let a = s
            .acquire(&key(i % subjects), &ask, 60_000, &mut Counters::default())
            .unwrap();
        assert!(a.verdict.allowed);
    }
    let took = t.elapsed();
    let cpu = cpu_us() - c0;
    let (mut hit, mut miss, mut write) = (0, 0, 0);
    for s in &stores {
        let c = s.conn.as_ref().unwrap();
        hit += status(c, rusqlite::ffi::SQLITE_DBSTATUS_CACHE_HIT);
        miss += status(c, rusqlite::ffi::SQLITE_DBSTATUS_CACHE_MISS);
        write += status(c, rusqlite::ffi::SQLITE_DBSTATUS_CACHE_WRITE);
    }
    let c = stores[0].conn.as_ref().unwrap();
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let frames1 = std::fs::metadata(path.with_extension("sqlite-wal")).map_or(0, |m| m.len());
    let n = f64::from(calls);
    println!(
        "{variant:>8} {subjects:>5} subjects: {:.1} us/call ({:.1} cpu); per call: cache hits {:.2}, misses {:.2}, \
         pages written {:.2}; file {pages} pages; wal {frames0} -> {frames1} bytes",
        took.as_secs_f64() * 1e6 / n,
        cpu / n,
        hit as f64 / n,
        miss as f64 / n,
        write as f64 / n
    );
}

#[test]
#[ignore = "a measurement: run by hand (see the module's doc)"]
fn probe_admissions_after_other_workers_commits() {
    let variants = std::env::var("RL_PROBE").unwrap_or_else(|_| "base".into());
    for _ in 0..2 {
        for v in variants.split(',') {
            run(1, 20_000, v);
            run(1_000, 20_000, v);
        }
    }
}
