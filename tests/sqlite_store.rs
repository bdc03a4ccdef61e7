//! The SQLite store against real database files: the conformance suite every store passes,
//! then what only SQLite has (busy files, the bound on entries, corruption, the schema).

mod conformance;

use conformance::{ask, key, none, with_request, Backend, ManualClock, T0};
use ratelimit::core::counters::Counters;
use ratelimit::core::decision::Reason;
use ratelimit::core::decision::Source;
use ratelimit::storage::denycache::{Denials, DenyCache};
use ratelimit::storage::sqlite::SqliteStore;
use ratelimit::storage::{Batching, Clock, ErrorKind, Reports, Store};

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
    s.acquire(&key(k), &ask(limit, per_ms, inflight), 60_000, &mut none())
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
    assert_eq!(
        s.peek(&key(2), &policy, &mut none()).unwrap().reason,
        Reason::Ok
    );
    assert_eq!(
        s.peek(&key(1), &policy, &mut none()).unwrap().reason,
        Reason::Rate
    );
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
    let r = s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut carried.clone());
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
            s.acquire(&key(1), &ask(5, 1_000, 0), 60_000, &mut none())
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

/// The bound on entries never costs a bucket that holds information (in debt) while a drained
/// one exists anywhere in the table, however the buckets are ordered by recency: 1,500
/// drained buckets and 3,499 in debt, filled in one burst, then 1,500 new subjects.
#[test]
fn drained_buckets_anywhere_go_before_any_bucket_in_debt() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = SqliteStore::open(&f.path, 5_000, 5_000, clock.clock()).unwrap();
    let hour = 3_600_000;
    let subject = |i: u32| {
        let mut k = key(0);
        k.bucket[..4].copy_from_slice(&i.to_be_bytes());
        k
    };
    let in_debt = |i: u32| i % 10 >= 3; // 7 in 10 are slow and stay in debt
    let mut debts = 0;
    for i in 0..4_999u32 {
        let per = if in_debt(i) { hour } else { 1_000 };
        s.acquire(&subject(i), &ask(1, per, 0), 60_000, &mut none())
            .unwrap();
        debts += u32::from(in_debt(i));
    }
    assert_eq!((debts, 4_999 - debts), (3_499, 1_500));
    clock.set(T0 + 2_000); // the fast ones are full again: drained
    for i in 0..1_500u32 {
        let a = s
            .acquire(
                &subject(1_000_000 + i),
                &ask(1, hour, 0),
                60_000,
                &mut none(),
            )
            .unwrap();
        assert!(a.verdict.allowed);
    }
    let st = s.stats().unwrap();
    // Every drained bucket went (in batches), and nothing else.
    assert_eq!((st.counters.evicted, st.entries), (0, 3_499 + 1_500));
    let policy = ask(1, hour, 0).policy;
    let kept = (0..4_999u32)
        .filter(|&i| in_debt(i))
        .filter(|&i| s.peek(&subject(i), &policy, &mut none()).unwrap().reason == Reason::Rate)
        .count();
    assert_eq!(kept, 3_499, "every debt is kept");
}

/// Once no drained bucket is left anywhere, a new subject evicts the least recently used bucket
/// (nginx's limit_req does the same): the drain floor spares each new subject a second scan.
#[test]
fn with_no_drained_bucket_left_the_least_recently_used_goes() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 3, &clock);
    let hour = 3_600_000;
    acquire(&mut s, &clock, T0, 1, 1, hour, 0);
    acquire(&mut s, &clock, T0 + 200, 2, 1, hour, 0);
    acquire(&mut s, &clock, T0 + 400, 3, 1, 1_000, 0); // drained from T0 + 1_400
    acquire(&mut s, &clock, T0 + 600, 4, 1, hour, 0); // nothing drained yet: key 1 goes
    acquire(&mut s, &clock, T0 + 1_400, 5, 1, hour, 0); // key 3 is drained now: it goes
    let st = s.stats().unwrap();
    assert_eq!((st.counters.evicted, st.entries), (1, 3));
    let policy = ask(1, hour, 0).policy;
    clock.set(T0 + 1_500);
    let reasons: Vec<_> = [1, 2, 4, 5]
        .iter()
        .map(|&k| s.peek(&key(k), &policy, &mut none()).unwrap().reason)
        .collect();
    assert_eq!(
        reasons,
        [Reason::Ok, Reason::Rate, Reason::Rate, Reason::Rate]
    );
}

/// In a table larger than the sample (issue 24: no recency index), a new subject evicts the
/// least recently used of a random sample: never a bucket used since every bucket of the
/// sample was, so with half the table used a minute ago and half just now, an old one (the
/// chance that 64 keys in a row are all recent is 2^-64). Keys spread as pseudonyms are.
#[test]
fn in_a_table_larger_than_the_sample_an_old_bucket_is_evicted_not_a_recent_one() {
    use sha2::Digest;
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = SqliteStore::open(&f.path, 5_000, 1_000, clock.clock()).unwrap();
    let hour = 3_600_000;
    let spread = |i: u32| {
        let mut k = key(0);
        k.bucket
            .copy_from_slice(&sha2::Sha256::digest(i.to_be_bytes())[..16]);
        k
    };
    let admit = |s: &mut SqliteStore, i: u32| {
        let a = s.acquire(&spread(i), &ask(1, hour, 0), 60_000, &mut none());
        assert!(a.unwrap().verdict.allowed);
    };
    for i in 0..500 {
        admit(&mut s, i); // old: a minute before the others
    }
    clock.set(T0 + 60_000);
    for i in 500..1_000 {
        admit(&mut s, i);
    }
    clock.set(T0 + 61_000);
    for i in 1_000..1_100 {
        admit(&mut s, i); // 100 new subjects, each evicting one bucket in debt
    }
    let st = s.stats().unwrap();
    assert_eq!((st.entries, st.counters.evicted), (1_000, 100));
    let policy = ask(1, hour, 0).policy;
    let recent_kept = (500..1_000u32)
        .filter(|&i| s.peek(&spread(i), &policy, &mut none()).unwrap().reason == Reason::Rate)
        .count();
    assert_eq!(recent_kept, 500, "an evicted bucket was a recent one");
}

/// A released lease can make a full bucket drained before the stored floor: the release
/// lowers the floor, so that bucket goes before one in debt, even outside the LRU window.
#[test]
fn a_released_lease_lowers_the_drain_floor() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 100, &clock);
    let hour = 3_600_000;
    let many = |i: u32| {
        let mut k = key(0);
        k.bucket[..4].copy_from_slice(&i.to_be_bytes());
        k
    };
    for i in 0..99 {
        s.acquire(&many(i), &ask(1, hour, 0), 60_000, &mut none())
            .unwrap(); // in debt for an hour
    }
    // The most recently used: full again at T0 + 200, but leased for a minute.
    clock.set(T0 + 100);
    let lease = s
        .acquire(&key(1), &ask(10, 1_000, 1), 60_000, &mut none())
        .unwrap()
        .lease
        .unwrap();
    // Nothing is drained at T0 + 200 (key 1 holds a lease): one bucket in debt must go.
    clock.set(T0 + 200);
    s.acquire(&many(1_000), &ask(1, hour, 0), 60_000, &mut none())
        .unwrap();
    assert_eq!(s.stats().unwrap().counters.evicted, 1);
    clock.set(T0 + 300);
    assert_eq!(s.release(&[lease], &mut none()).unwrap(), 1);
    // Key 1 is drained now: the next new subject drops it, and no other bucket in debt.
    clock.set(T0 + 400);
    s.acquire(&many(1_001), &ask(1, hour, 0), 60_000, &mut none())
        .unwrap();
    let st = s.stats().unwrap();
    assert_eq!((st.counters.evicted, st.entries), (1, 100));
    assert_eq!(
        s.peek(&key(1), &ask(10, 1_000, 0).policy, &mut none())
            .unwrap()
            .remaining,
        10
    );
}

/// A denial needs no write lock: it is decided from a read snapshot (WAL readers never wait
/// for the writer), so a hammered subject costs no write and waits for no one.
#[test]
fn a_denial_is_decided_while_another_writer_holds_the_lock() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    // A long wait budget: a decision that waited for the lock would take seconds, not the
    // moment a snapshot read takes, however loaded the machine.
    let mut s = SqliteStore::open(&f.path, 5_000, 10, clock.clock()).unwrap();
    assert!(
        acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0)
            .verdict
            .allowed
    );
    // Right after an admission a process goes straight to the write lock (it expects another);
    // the denial it meets there makes it look at snapshots first again.
    let v = acquire(&mut s, &clock, T0 + 5, 1, 1, 3_600_000, 0).verdict;
    assert_eq!(v.reason, Reason::Rate);
    let holder = rusqlite::Connection::open(&f.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let v = acquire(&mut s, &clock, T0 + 10, 1, 1, 3_600_000, 0).verdict;
    assert_eq!(v.reason, Reason::Rate);
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "{:?}",
        started.elapsed()
    );
    // An allowed decision still needs the lock: busy now (seen by a store with a short budget).
    let mut quick = open(&f.path, 10, &clock);
    let other = quick.acquire(&key(2), &ask(1, 3_600_000, 0), 60_000, &mut none());
    assert!(other.is_err_and(|e| e.kind() == ErrorKind::Busy));
    holder.execute_batch("COMMIT").unwrap();
}

/// Issue 20: a fresh request id on every denied call must not turn each denial into a write.
/// With another connection holding the write lock, a call with a fresh id on an emptied bucket
/// is denied from the snapshot (record and bucket read together) at once, as is a retry in
/// progress; only a replay (which counts down its record) needs the lock.
#[test]
fn denials_and_retries_in_progress_with_request_ids_need_no_write() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = SqliteStore::open(&f.path, 5_000, 1_000, clock.clock()).unwrap();
    let a = |id: u8| with_request(ask(1, 3_600_000, 0), id, 60_000);
    assert!(s
        .acquire(&key(1), &a(1), 60_000, &mut none())
        .unwrap()
        .verdict
        .took());
    // After an admission this process goes to the write lock first; a denial sends it back
    // to snapshots.
    let v = s
        .acquire(&key(1), &a(2), 60_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::Rate);
    let held = with_request(ask(5, 3_600_000, 1), 9, 60_000);
    let first = s.acquire(&key(2), &held, 60_000, &mut none()).unwrap();
    assert!(first.lease.is_some());
    let v = s
        .acquire(&key(2), &held, 60_000, &mut none())
        .unwrap()
        .verdict;
    assert_eq!(v.reason, Reason::InProgress);
    let holder = rusqlite::Connection::open(&f.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    for id in 10..60 {
        let v = s
            .acquire(&key(1), &a(id), 60_000, &mut none())
            .unwrap()
            .verdict;
        assert_eq!((v.allowed, v.reason), (false, Reason::Rate));
    }
    let r = s.acquire(&key(2), &held, 60_000, &mut none()).unwrap();
    assert_eq!((r.verdict.reason, r.lease), (Reason::InProgress, None));
    // 51 calls that each waited for the lock would take 51 x 5 s.
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "{:?}",
        started.elapsed()
    );
    // A replay needs the lock: busy for a store with a short budget.
    let mut quick = open(&f.path, 10, &clock);
    let replay = quick.acquire(&key(1), &a(1), 60_000, &mut none());
    assert!(replay.is_err_and(|e| e.kind() == ErrorKind::Busy));
    holder.execute_batch("COMMIT").unwrap();
    let r = quick.acquire(&key(1), &a(1), 60_000, &mut none()).unwrap();
    assert!(r.verdict.replay && r.verdict.allowed);
    s.flush(&mut none()).unwrap();
    let c = quick.stats().unwrap().counters;
    assert_eq!(
        (c.allowed, c.denied_rate, c.denied_in_progress, c.retries),
        (2, 51, 2, 1)
    );
}

/// Counts of denials from snapshots are written by the process's next write, at the latest
/// within a second (or when the store is flushed at process end): none is lost.
#[test]
fn counts_of_snapshot_denials_are_written_later_and_none_is_lost() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 10, &clock);
    let mut observer = open(&f.path, 10, &clock);
    acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0);
    acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0); // after an admission: under the lock, written
    for _ in 0..5 {
        acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0);
    }
    assert_eq!(
        s.stats().unwrap().counters.denied_rate,
        6,
        "this process counts them"
    );
    assert_eq!(
        observer.stats().unwrap().counters.denied_rate,
        1,
        "not written yet"
    );
    acquire(&mut s, &clock, T0, 2, 1, 3_600_000, 0); // a write carries them
    assert_eq!(observer.stats().unwrap().counters.denied_rate, 6);
    acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0);
    s.flush(&mut none()).unwrap();
    let c = observer.stats().unwrap().counters;
    assert_eq!((c.allowed, c.denied_rate), (2, 7));
}

/// At most `max_entries` remembered answers are kept: the oldest go first, and their retries are charged.
#[test]
fn remembered_requests_are_bounded_by_max_entries() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 100, &clock);
    for n in 0..150u8 {
        clock.set(T0 + i64::from(n));
        let a = with_request(ask(1_000, 60_000, 0), n, 60_000);
        assert!(s
            .acquire(&key(1), &a, 60_000, &mut none())
            .unwrap()
            .verdict
            .took());
    }
    // The newest is remembered, the oldest forgotten.
    let newest = with_request(ask(1_000, 60_000, 0), 149, 60_000);
    let oldest = with_request(ask(1_000, 60_000, 0), 0, 60_000);
    let before = s
        .peek(&key(1), &newest.policy, &mut none())
        .unwrap()
        .remaining;
    s.acquire(&key(1), &newest, 60_000, &mut none()).unwrap();
    assert_eq!(
        s.peek(&key(1), &newest.policy, &mut none())
            .unwrap()
            .remaining,
        before
    );
    s.acquire(&key(1), &oldest, 60_000, &mut none()).unwrap();
    assert_eq!(
        s.peek(&key(1), &newest.policy, &mut none())
            .unwrap()
            .remaining,
        before - 1
    );
    assert_eq!(s.stats().unwrap().counters.retries, 1);
}

/// A remembered request whose lease is live is never dropped to make room: the red team dropped
/// one (max_entries 3) by admitting other subjects, and its retry was admitted beside it.
#[test]
fn a_request_whose_lease_is_live_is_never_dropped_to_make_room() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 3, &clock);
    let first = with_request(ask(10, 60_000, 2), 7, 60_000);
    assert!(s
        .acquire(&key(1), &first, 60_000, &mut none())
        .unwrap()
        .verdict
        .took());
    for n in 10..30u8 {
        clock.set(T0 + i64::from(n));
        let other = with_request(ask(10, 60_000, 0), n, 600_000);
        s.acquire(&key(n), &other, 60_000, &mut none()).unwrap();
    }
    let again = s.acquire(&key(1), &first, 60_000, &mut none()).unwrap();
    assert_eq!(
        (
            again.verdict.allowed,
            again.verdict.reason,
            again.lease.is_some()
        ),
        (false, Reason::InProgress, false)
    );
}

/// Denials from snapshots are counted in their bucket's row, for `top`; when another process
/// drops the row first (a reset), they go into the totals instead: each counted once.
#[test]
fn snapshot_denials_go_into_their_bucket_or_once_into_the_totals() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 10, &clock);
    let mut other = open(&f.path, 10, &clock);
    acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0);
    acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0); // after an admission: under the lock
    for _ in 0..4 {
        acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0); // from snapshots, held back
    }
    assert_eq!(other.top(5).unwrap()[0].denied_rate, 1, "not written yet");
    s.flush(&mut none()).unwrap();
    let v = other.top(5).unwrap();
    assert_eq!(
        (v.len(), v[0].bucket, v[0].denied_rate),
        (1, key(1).bucket, 5)
    );
    for _ in 0..3 {
        acquire(&mut s, &clock, T0, 1, 1, 3_600_000, 0);
    }
    assert!(other.reset(&key(1), &mut none()).unwrap());
    s.flush(&mut none()).unwrap();
    assert!(other.top(5).unwrap().is_empty());
    let c = other.stats().unwrap().counters;
    assert_eq!((c.allowed, c.denied_rate), (1, 8));
}

/// A worker's store as php-fpm opens it: SQLite behind the worker's deny cache.
fn cached(path: &Path, max_entries: u64, clock: &ManualClock) -> DenyCache {
    DenyCache::new(
        Box::new(open(path, max_entries, clock)),
        clock.clock(),
        Denials::InBuckets,
    )
}

fn decide(s: &mut DenyCache, clock: &ManualClock, t: i64, k: u8) -> (bool, Source) {
    clock.set(t);
    let a = s
        .acquire(&key(k), &ask(1, 60_000, 0), 60_000, &mut none())
        .unwrap();
    (a.verdict.allowed, a.verdict.source)
}

#[test]
fn a_reset_by_another_process_ends_the_denials_of_every_deny_cache() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let (mut a, mut b) = (cached(&f.path, 100, &clock), cached(&f.path, 100, &clock));
    assert_eq!(decide(&mut a, &clock, T0, 1), (true, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::DenyCache));
    assert!(b.reset(&key(1), &mut none()).unwrap());
    assert_eq!(decide(&mut a, &clock, T0, 1), (true, Source::Store));
}

#[test]
fn a_reset_after_the_queue_file_was_truncated_and_made_anew_ends_the_denials_of_every_deny_cache() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let (mut a, mut b) = (cached(&f.path, 100, &clock), cached(&f.path, 100, &clock));
    // One reset first: a's caches are made at a count of 1, which a count started afresh in a
    // new file reaches again with one reset.
    decide(&mut a, &clock, T0, 2);
    assert!(b.reset(&key(2), &mut none()).unwrap());
    assert_eq!(decide(&mut a, &clock, T0, 1), (true, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::DenyCache));
    let mut queue = f.path.clone().into_os_string();
    queue.push(".queue");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&queue)
        .unwrap()
        .set_len(0)
        .unwrap();
    // b's next call finds it truncated (a fault, on private zeros) and opens it anew: a new
    // mutex and a count from 0, which b's reset brings to 1.
    decide(&mut b, &clock, T0, 3);
    assert!(b.reset(&key(1), &mut none()).unwrap());
    assert_eq!(decide(&mut a, &clock, T0, 1), (true, Source::Store));
}

#[test]
fn an_eviction_by_another_process_ends_the_denials_of_every_deny_cache() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let (mut a, mut b) = (cached(&f.path, 1, &clock), cached(&f.path, 1, &clock));
    assert_eq!(decide(&mut a, &clock, T0, 1), (true, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::DenyCache));
    // A table of one bucket: another subject evicts the first, which is full again.
    assert_eq!(decide(&mut b, &clock, T0 + 1, 2), (true, Source::Store));
    assert_eq!(decide(&mut a, &clock, T0 + 2, 1), (true, Source::Store));
}

#[test]
fn a_deny_cache_denial_is_counted_once_in_the_totals_and_its_bucket() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut a = cached(&f.path, 100, &clock);
    decide(&mut a, &clock, T0, 1);
    decide(&mut a, &clock, T0, 1);
    for _ in 0..3 {
        assert_eq!(decide(&mut a, &clock, T0, 1), (false, Source::DenyCache));
    }
    let counted = |s: &mut dyn Store| {
        // A stack answers these through its layers (StoreExt), a store itself (Reports).
        let st = ratelimit::storage::StoreExt::stats(s, &mut none()).unwrap();
        let top = ratelimit::storage::StoreExt::top(s, 1, &mut none()).unwrap();
        (st.counters.denied_rate, top[0].denied_rate)
    };
    assert_eq!(counted(&mut a), (4, 4));
    ratelimit::storage::StoreExt::flush(&mut a, &mut none()).unwrap();
    let mut b = open(&f.path, 100, &clock);
    assert_eq!(counted(&mut b), (4, 4));
}

#[test]
fn workers_hammering_a_subject_at_its_limit_admit_exactly_the_limit() {
    // Six workers (each its own connection and deny cache, as six php-fpm workers), no refill
    // (the clock stands still): denials come from snapshots and from the caches.
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    // Opened one at a time (a call on another subject opens the file and the write queue): six
    // openers at once on a loaded machine could wait out the queue file's lock, and a worker
    // without a queue caches nothing. Then all start together.
    let opening = std::sync::Mutex::new(());
    let start = std::sync::Barrier::new(6);
    let sources: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..6)
            .map(|_| {
                let (path, clock, opening, start) =
                    (f.path.clone(), clock.clone(), &opening, &start);
                s.spawn(move || {
                    let mut w = {
                        let _one = opening.lock().unwrap();
                        let mut w = DenyCache::new(
                            Box::new(
                                SqliteStore::open(&path, 5_000, 1_000, clock.clock()).unwrap(),
                            ),
                            clock.clock(),
                            Denials::InBuckets,
                        );
                        w.acquire(&key(2), &ask(100, 3_600_000, 0), 60_000, &mut none())
                            .unwrap();
                        w
                    };
                    start.wait();
                    let (mut admitted, mut from_store, mut from_cache) = (0, 0, 0);
                    for _ in 0..500 {
                        let a = w
                            .acquire(&key(1), &ask(100, 3_600_000, 0), 60_000, &mut none())
                            .unwrap();
                        match (a.verdict.allowed, a.verdict.source) {
                            (true, _) => admitted += 1,
                            (false, Source::DenyCache) => from_cache += 1,
                            (false, _) => from_store += 1,
                        }
                    }
                    (admitted, from_store, from_cache)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let admitted: u64 = sources.iter().map(|s| s.0).sum();
    assert_eq!(admitted, 100, "{sources:?}");
    assert!(
        sources.iter().all(|s| s.2 > 0),
        "every worker denied from its cache: {sources:?}"
    );
}

#[test]
fn a_database_of_a_newer_build_is_refused_not_used_nor_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    let clock = ManualClock::at(T0);
    acquire(&mut open(&path, 100, &clock), &clock, T0, 1, 5, 60_000, 0);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(c);
    let e = SqliteStore::open(&path, 100, 100, clock.clock())
        .err()
        .expect("refused at open");
    assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    assert!(e.to_string().contains("newer build"), "{e}");
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 99, "left as it was");
}

#[test]
fn a_database_of_an_older_schema_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rl.sqlite");
    // As a build that never landed left it: version 6, a key record without its host.
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; CREATE TABLE keyring (id INTEGER PRIMARY KEY, fingerprint BLOB, path TEXT);
         CREATE TABLE stats (id INTEGER PRIMARY KEY); PRAGMA user_version = 6;",
    )
    .unwrap();
    drop(c);
    let clock = ManualClock::at(T0);
    let mut s = open(&path, 100, &clock);
    assert!(acquire(&mut s, &clock, T0, 1, 5, 60_000, 0).verdict.allowed);
    assert!(s.stats().is_ok());
}

/// A compound call whose new bucket needs room must not make it by dropping another bucket of
/// the same call (which its write then brings back): the table would go past `max_entries`,
/// and an eviction would be counted for a bucket that was never lost.
#[test]
fn a_compound_call_makes_room_with_buckets_outside_the_call() {
    let f = SqliteFile::new();
    let clock = ManualClock::at(T0);
    let mut s = open(&f.path, 2, &clock);
    let hour = 3_600_000;
    acquire(&mut s, &clock, T0, 2, 2, hour, 0);
    acquire(&mut s, &clock, T0 + 1_000, 3, 2, hour, 0);
    clock.set(T0 + 2_000);
    let asks = [ask(2, hour, 0), ask(2, hour, 0)];
    let a = s
        .acquire_all(&[key(1), key(2)], &asks, 60_000, &mut none())
        .unwrap();
    assert!(a.verdict.allowed, "{a:?}");
    let rows: i64 = rusqlite::Connection::open(&f.path)
        .unwrap()
        .query_row("SELECT count(*) FROM buckets", [], |r| r.get(0))
        .unwrap();
    assert!(rows <= 2, "{rows} rows with max_entries 2");
}
