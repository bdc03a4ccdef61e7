//! The SQLite store against real database files: one behaviour per test.

use ratelimit::core::bucket::Policy;
use ratelimit::core::decision::{Ask, Reason};
use ratelimit::storage::sqlite::SqliteStore;
use ratelimit::storage::{Store, StoreError};
use std::path::Path;

const T0: i64 = 1_700_000_000_000;

fn ask(limit: u64, per_ms: u64, inflight: u64) -> Ask {
    Ask {
        policy: Policy::new(limit, per_ms).unwrap(),
        cost: 1,
        max_inflight: inflight,
    }
}

fn open(path: &Path, max_entries: u64) -> SqliteStore {
    SqliteStore::open(path, 100, max_entries).unwrap()
}

/// A clock stopped at `t`.
fn at(t: i64) -> impl Fn() -> i64 {
    move || t
}

fn key(n: u8) -> [u8; 16] {
    [n; 16]
}

#[test]
fn the_limit_holds_across_threads_with_their_own_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    open(&path, 1000);
    let admitted: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let path = &path;
                s.spawn(move || {
                    let mut store = SqliteStore::open(path, 5_000, 1000).unwrap();
                    (0..50)
                        .filter(|_| {
                            store
                                .acquire(&key(1), &ask(25, 86_400_000, 0), 60_000, &at(T0))
                                .unwrap()
                                .verdict
                                .allowed
                        })
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 25);
    let stats = open(&path, 1000).stats(&at(T0)).unwrap();
    assert_eq!(
        (stats.counters.allowed, stats.counters.denied_rate),
        (25, 375)
    );
}

#[test]
fn state_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    let mut a = open(&path, 10);
    for _ in 0..3 {
        a.acquire(&key(1), &ask(3, 60_000, 0), 60_000, &at(T0))
            .unwrap();
    }
    drop(a);
    let v = open(&path, 10)
        .acquire(&key(1), &ask(3, 60_000, 0), 60_000, &at(T0))
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::Rate);
}

#[test]
fn leases_limit_concurrency_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    let a = ask(100, 1_000, 2);
    assert!(s
        .acquire(&key(1), &a, 2_000, &at(T0))
        .unwrap()
        .lease
        .is_some());
    assert!(s
        .acquire(&key(1), &a, 2_000, &at(T0 + 10))
        .unwrap()
        .lease
        .is_some());
    let third = s.acquire(&key(1), &a, 2_000, &at(T0 + 20)).unwrap().verdict;
    assert_eq!(third.reason, Reason::Inflight);
    assert_eq!(third.retry_after_ms, 1_980);
    assert_eq!(
        s.acquire(&key(1), &a, 2_000, &at(T0 + 1_999))
            .unwrap()
            .verdict
            .reason,
        Reason::Inflight
    );
    assert!(
        s.acquire(&key(1), &a, 2_000, &at(T0 + 2_000))
            .unwrap()
            .verdict
            .allowed
    );
    assert_eq!(s.stats(&at(T0 + 2_000)).unwrap().counters.leases_expired, 1);
}

#[test]
fn release_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    let lease = s
        .acquire(&key(1), &ask(5, 1_000, 1), 60_000, &at(T0))
        .unwrap()
        .lease
        .unwrap();
    assert_eq!(s.release(&[lease], &at(T0)).unwrap(), 1);
    assert_eq!(s.release(&[lease], &at(T0)).unwrap(), 0);
    assert!(
        s.acquire(&key(1), &ask(5, 1_000, 1), 60_000, &at(T0))
            .unwrap()
            .verdict
            .allowed
    );
}

#[test]
fn an_expired_lease_is_not_released_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    let lease = s
        .acquire(&key(1), &ask(5, 1_000, 1), 1_000, &at(T0))
        .unwrap()
        .lease
        .unwrap();
    assert_eq!(s.release(&[lease], &at(T0 + 1_000)).unwrap(), 0);
}

#[test]
fn reset_forgets_bucket_and_leases() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    s.acquire(&key(1), &ask(1, 60_000, 1), 60_000, &at(T0))
        .unwrap();
    assert!(s.reset(&key(1)).unwrap());
    assert!(!s.reset(&key(1)).unwrap());
    assert!(
        s.acquire(&key(1), &ask(1, 60_000, 1), 60_000, &at(T0))
            .unwrap()
            .verdict
            .allowed
    );
    assert_eq!(s.stats(&at(T0)).unwrap().entries, 1);
}

#[test]
fn peek_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    let v = s
        .peek(&key(1), &Policy::new(5, 1_000).unwrap(), &at(T0))
        .unwrap();
    assert_eq!((v.allowed, v.remaining), (true, 5));
    let st = s.stats(&at(T0)).unwrap();
    assert_eq!((st.entries, st.counters.allowed), (0, 0));
}

#[test]
fn drained_buckets_make_room_without_counting_an_eviction() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 2);
    s.acquire(&key(1), &ask(1, 1_000, 0), 60_000, &at(T0))
        .unwrap();
    s.acquire(&key(2), &ask(1, 1_000, 0), 60_000, &at(T0))
        .unwrap();
    // Both are full again a second later: dropping them loses nothing.
    assert!(
        s.acquire(&key(3), &ask(1, 1_000, 0), 60_000, &at(T0 + 1_000))
            .unwrap()
            .verdict
            .allowed
    );
    let st = s.stats(&at(T0 + 1_000)).unwrap();
    assert_eq!((st.entries, st.counters.evicted), (1, 0));
}

#[test]
fn the_least_recently_used_bucket_is_evicted_when_none_is_drained() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 2);
    let slow = ask(1, 3_600_000, 0);
    // Recency is kept to a tenth of a second.
    s.acquire(&key(1), &slow, 60_000, &at(T0)).unwrap();
    s.acquire(&key(2), &slow, 60_000, &at(T0 + 1_000)).unwrap();
    s.acquire(&key(1), &slow, 60_000, &at(T0 + 2_000)).unwrap(); // a denial still counts as use
    s.acquire(&key(3), &slow, 60_000, &at(T0 + 3_000)).unwrap();
    let st = s.stats(&at(T0 + 3_000)).unwrap();
    assert_eq!((st.entries, st.counters.evicted), (2, 1));
    // key 2 went (a peek finds it full again); key 1, used more recently, is still empty.
    assert_eq!(
        s.peek(&key(2), &slow.policy, &at(T0 + 4_000))
            .unwrap()
            .reason,
        Reason::Ok
    );
    assert_eq!(
        s.peek(&key(1), &slow.policy, &at(T0 + 4_000))
            .unwrap()
            .reason,
        Reason::Rate
    );
}

#[test]
fn a_table_full_of_live_leases_makes_new_subjects_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 1);
    assert!(
        s.acquire(&key(1), &ask(5, 3_600_000, 1), 60_000, &at(T0))
            .unwrap()
            .verdict
            .allowed
    );
    let v = s
        .acquire(&key(2), &ask(5, 3_600_000, 1), 60_000, &at(T0))
        .unwrap()
        .verdict;
    assert_eq!((v.allowed, v.reason), (false, Reason::Unavailable));
    assert_eq!(s.stats(&at(T0)).unwrap().counters.unavailable, 1);
}

#[test]
fn a_backwards_clock_is_counted_and_mints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 10);
    let a = ask(1, 1_000, 0);
    assert!(
        s.acquire(&key(1), &a, 60_000, &at(T0))
            .unwrap()
            .verdict
            .allowed
    );
    let v = s
        .acquire(&key(1), &a, 60_000, &at(T0 - 3_600_000))
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::Rate);
    assert_eq!(s.stats(&at(T0)).unwrap().counters.clock_regressions, 1);
}

#[test]
fn busy_storage_is_an_error_within_the_timeout_and_counted_later() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    let mut s = open(&path, 10);
    s.stats(&at(T0)).unwrap(); // the first call after opening shares open's budget; not this one
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let r = s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &at(T0));
    let waited = started.elapsed();
    assert!(matches!(r, Err(StoreError::Busy)), "{r:?}");
    assert!(waited >= std::time::Duration::from_millis(90), "{waited:?}");
    assert!(waited < std::time::Duration::from_millis(400), "{waited:?}");
    holder.execute_batch("COMMIT").unwrap();
    s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &at(T0))
        .unwrap();
    let fresh = open(&path, 10).stats(&at(T0)).unwrap();
    assert_eq!((fresh.counters.unavailable, fresh.counters.allowed), (1, 1));
}

#[test]
fn a_file_that_is_not_a_database_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let err = SqliteStore::open(&path, 100, 10).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(path.to_str().unwrap()));
}

#[test]
fn a_database_in_a_missing_directory_cannot_be_opened() {
    let err = SqliteStore::open(Path::new("/nonexistent/dir/rl.sqlite"), 100, 10)
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/dir/rl.sqlite"));
}

#[test]
fn opening_a_locked_new_file_gives_up_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder
        .execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE t(x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)",
        )
        .unwrap();
    let started = std::time::Instant::now();
    let r = SqliteStore::open(&path, 100, 10);
    let waited = started.elapsed();
    assert!(matches!(r, Err(StoreError::Busy)), "{:?}", r.err());
    assert!(waited >= std::time::Duration::from_millis(90), "{waited:?}");
    assert!(waited < std::time::Duration::from_millis(250), "{waited:?}");
}

#[test]
fn the_clock_is_read_once_the_write_lock_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    let mut s = SqliteStore::open(&path, 2_000, 10).unwrap();
    s.stats(&at(T0)).unwrap();
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let released = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let read_at = std::cell::Cell::new(None);
            let clock = || {
                read_at.set(Some(std::time::Instant::now()));
                T0
            };
            s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &clock)
                .unwrap();
            read_at.get().unwrap()
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let released = std::time::Instant::now();
        holder.execute_batch("COMMIT").unwrap();
        (released, waiter.join().unwrap())
    });
    assert!(
        released.1 >= released.0,
        "the clock was read while another writer held the lock"
    );
}

#[test]
fn counts_of_deleted_buckets_stay_in_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("rl.sqlite"), 1);
    let slow = ask(1, 3_600_000, 0);
    s.acquire(&key(1), &slow, 60_000, &at(T0)).unwrap(); // allowed
    s.acquire(&key(1), &slow, 60_000, &at(T0)).unwrap(); // denied
    s.acquire(&key(2), &slow, 60_000, &at(T0 + 1_000)).unwrap(); // evicts key 1, allowed
    assert!(s.reset(&key(2)).unwrap());
    let st = s.stats(&at(T0 + 1_000)).unwrap();
    assert_eq!(
        (
            st.counters.allowed,
            st.counters.denied_rate,
            st.counters.evicted
        ),
        (2, 1, 1)
    );
    assert_eq!(st.entries, 0);
}

#[test]
fn a_file_of_an_older_schema_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE buckets (key BLOB PRIMARY KEY, tokens INTEGER); PRAGMA user_version = 1;",
        )
        .unwrap();
    let mut s = open(&path, 10);
    assert!(
        s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &at(T0))
            .unwrap()
            .verdict
            .allowed
    );
    assert_eq!(s.stats(&at(T0)).unwrap().counters.allowed, 1);
}
