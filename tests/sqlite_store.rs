//! The SQLite store against real database files: the conformance suite every store passes,
//! then what only SQLite has (busy files, the bound on entries, corruption, the schema).

mod conformance;

use conformance::{ask, key, Backend, ManualClock, T0};
use ratelimit::core::counters::Counters;
use ratelimit::core::decision::Reason;
use ratelimit::storage::sqlite::SqliteStore;
use ratelimit::storage::{Clock, ErrorKind, Store};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use conformance::NONE;

/// One database file in a temporary directory of its own.
struct SqliteFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl SqliteFile {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        Self { _dir: dir, path }
    }
}

impl Backend for SqliteFile {
    type S = SqliteStore;
    fn open(&self, clock: Clock) -> SqliteStore {
        SqliteStore::open(&self.path, 5_000, 1_000, clock).unwrap()
    }
}

conformance_suite!(SqliteFile::new());

fn open(path: &Path, max_entries: u64, clock: &ManualClock) -> SqliteStore {
    SqliteStore::open(path, 100, max_entries, clock.clock()).unwrap()
}

fn acquire(
    s: &mut SqliteStore,
    clock: &ManualClock,
    t: i64,
    k: u8,
    limit: u64,
    per_ms: u64,
    inflight: u64,
) -> ratelimit::storage::Acquired {
    clock.set(t);
    s.acquire(&key(k), &ask(limit, per_ms, inflight), 60_000, &NONE)
        .unwrap()
}

#[test]
fn drained_buckets_make_room_without_counting_an_eviction() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 2, &clock);
    acquire(&mut s, &clock, T0, 1, 1, 1_000, 0);
    acquire(&mut s, &clock, T0, 2, 1, 1_000, 0);
    // Both are full again a second later: dropping them loses nothing.
    assert!(
        acquire(&mut s, &clock, T0 + 1_000, 3, 1, 1_000, 0)
            .verdict
            .allowed
    );
    let st = s.stats().unwrap();
    assert_eq!((st.entries, st.counters.evicted), (1, 0));
}

#[test]
fn the_least_recently_used_bucket_is_evicted_when_none_is_drained() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 2, &clock);
    let hour = 3_600_000;
    // Recency is kept to a tenth of a second.
    acquire(&mut s, &clock, T0, 1, 1, hour, 0);
    acquire(&mut s, &clock, T0 + 1_000, 2, 1, hour, 0);
    acquire(&mut s, &clock, T0 + 2_000, 1, 1, hour, 0); // a denial still counts as use
    acquire(&mut s, &clock, T0 + 3_000, 3, 1, hour, 0);
    let st = s.stats().unwrap();
    assert_eq!((st.entries, st.counters.evicted), (2, 1));
    // key 2 went (a peek finds it full again); key 1, used more recently, is still empty.
    clock.set(T0 + 4_000);
    let policy = ask(1, hour, 0).policy;
    assert_eq!(s.peek(&key(2), &policy).unwrap().reason, Reason::Ok);
    assert_eq!(s.peek(&key(1), &policy).unwrap().reason, Reason::Rate);
}

#[test]
fn a_table_full_of_live_leases_makes_new_subjects_unavailable() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 1, &clock);
    assert!(
        acquire(&mut s, &clock, T0, 1, 5, 3_600_000, 1)
            .verdict
            .allowed
    );
    let v = acquire(&mut s, &clock, T0, 2, 5, 3_600_000, 1).verdict;
    assert_eq!((v.allowed, v.reason), (false, Reason::Unavailable));
    assert_eq!(s.stats().unwrap().counters.unavailable, 1);
}

#[test]
fn counts_of_evicted_buckets_stay_in_the_totals() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 1, &clock);
    let hour = 3_600_000;
    acquire(&mut s, &clock, T0, 1, 1, hour, 0); // allowed
    acquire(&mut s, &clock, T0, 1, 1, hour, 0); // denied
    acquire(&mut s, &clock, T0 + 1_000, 2, 1, hour, 0); // evicts key 1, allowed
    let st = s.stats().unwrap();
    assert_eq!(
        (
            st.counters.allowed,
            st.counters.denied_rate,
            st.counters.evicted,
            st.entries
        ),
        (2, 1, 1, 1)
    );
}

#[test]
fn busy_storage_is_an_error_within_the_timeout_and_writes_nothing() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 10, &clock);
    s.stats().unwrap(); // the first call after opening shares open's budget; not this one
    let holder = rusqlite::Connection::open(&f.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let carried = Counters {
        unavailable: 1,
        ..NONE
    };
    let r = s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &carried);
    let waited = started.elapsed();
    assert!(
        r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Busy),
        "{r:?}"
    );
    assert!(r.unwrap_err().is_transient());
    assert!(waited >= Duration::from_millis(90), "{waited:?}");
    assert!(waited < Duration::from_millis(400), "{waited:?}");
    holder.execute_batch("COMMIT").unwrap();
    let fresh = open(&f.path, 10, &clock).stats().unwrap();
    assert_eq!((fresh.counters.unavailable, fresh.counters.allowed), (0, 0));
}

#[test]
fn a_file_that_is_not_a_database_is_reported_as_corrupt() {
    let f = SqliteFile::new();
    std::fs::write(&f.path, vec![b'x'; 8192]).unwrap();
    let err = SqliteStore::open(&f.path, 100, 10, ManualClock::at(T0).clock())
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err:?}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains(f.path.to_str().unwrap()));
    assert!(
        std::error::Error::source(&err).is_some(),
        "SQLite's error is the source"
    );
}

#[test]
fn a_database_in_a_missing_directory_cannot_be_opened() {
    let err = SqliteStore::open(
        Path::new("/nonexistent/dir/rl.sqlite"),
        100,
        10,
        ManualClock::at(T0).clock(),
    )
    .err()
    .unwrap();
    assert_eq!(err.kind(), ErrorKind::Misconfigured, "{err:?}");
    assert!(err.to_string().contains("/nonexistent/dir/rl.sqlite"));
}

/// Opening has a budget of its own (the larger of busy_timeout_ms and 1 s), so that workers
/// racing on a fresh file on a loaded host are not answered "unavailable"; it stays bounded.
#[test]
fn opening_a_locked_new_file_gives_up_within_the_open_budget() {
    let f = SqliteFile::new();
    let holder = rusqlite::Connection::open(&f.path).unwrap();
    holder
        .execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE t(x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)",
        )
        .unwrap();
    let started = Instant::now();
    let r = SqliteStore::open(&f.path, 100, 10, ManualClock::at(T0).clock());
    let waited = started.elapsed();
    assert!(
        r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Busy),
        "{:?}",
        r.err()
    );
    assert!(waited >= Duration::from_millis(990), "{waited:?}");
    assert!(waited < Duration::from_millis(1_300), "{waited:?}");
}

#[test]
fn the_clock_is_read_once_the_write_lock_is_held() {
    let f = SqliteFile::new();
    let read_at = std::sync::Arc::new(std::sync::Mutex::new(None));
    let clock: Clock = {
        let read_at = std::sync::Arc::clone(&read_at);
        std::sync::Arc::new(move || {
            *read_at.lock().unwrap() = Some(Instant::now());
            T0
        })
    };
    let mut s = SqliteStore::open(&f.path, 2_000, 10, clock).unwrap();
    s.stats().unwrap();
    let holder = rusqlite::Connection::open(&f.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let released = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &NONE)
                .unwrap();
        });
        std::thread::sleep(Duration::from_millis(100));
        let released = Instant::now();
        holder.execute_batch("COMMIT").unwrap();
        waiter.join().unwrap();
        released
    });
    let read = read_at.lock().unwrap().unwrap();
    assert!(
        read >= released,
        "the clock was read while another writer held the lock"
    );
}

#[test]
fn a_file_of_an_older_schema_is_rebuilt() {
    let f = SqliteFile::new();
    rusqlite::Connection::open(&f.path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE buckets (key BLOB PRIMARY KEY, tokens INTEGER); PRAGMA user_version = 1;",
        )
        .unwrap();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 10, &clock);
    assert!(acquire(&mut s, &clock, T0, 1, 5, 1_000, 0).verdict.allowed);
    assert_eq!(s.stats().unwrap().counters.allowed, 1);
}
