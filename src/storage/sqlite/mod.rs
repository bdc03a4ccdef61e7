//! The SQLite store: one file shared by every worker of a host.
//!
//! Each decision is one write transaction begun as a writer (`BEGIN IMMEDIATE`, see
//! [`tx`]), so two workers can never both read the same tokens and both take them. WAL with
//! `synchronous=NORMAL`: a commit is durable against a crashed process (what a killed worker
//! is) and costs no fsync; a power cut can lose the last few decisions, which only ever gives
//! tokens back to clients as if a little time had passed.

mod busy;
mod counts;
mod evict;
mod file;
mod queue;
mod requests;
mod rows;
mod schema;
mod tx;

use super::{
    Acquired, AcquiredAll, BucketView, Clock, Counters, ErrorKind, RefillEpoch, Stats, Store,
    StoreError,
};
use crate::core::bucket::{Bucket, Policy};
use crate::core::compound;
use crate::core::decision::{self, Ask, Reason, Verdict};
use crate::core::keyswitch::{Fingerprint, KeyRecord, STAMP_NOW};
use crate::core::lease::{self, LeaseToken, Slots};
use crate::core::request::Judgement;
use crate::core::subject::{BucketKey, Pseudonym};
use crate::opslog::{Event, OpsLog};
use busy::Budget;
use counts::{Delta, Touch};
use rows::{read_bucket, write_bucket, Stored};
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{params, Connection, ErrorCode, FileControl, OpenFlags, OptionalExtension};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tx::{ReadTx, WriteTx};

/// How often a process checks that the path still names the file it has open.
const MOVED_CHECK: Duration = Duration::from_secs(1);
/// How long counts of denials served from snapshots may wait to be written.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How many buckets a process remembers as admitting.
const ADMITTING_MAX: usize = 4_096;
/// WAL frames (pages) from which a commit checkpoints: SQLite's own default threshold.
const CHECKPOINT_FRAMES: i32 = 1_000;
/// How long a checkpoint may wait for other workers' transactions to end.
const CHECKPOINT_WAIT: Duration = Duration::from_millis(10);
/// How long a process leaves checkpoints to others after one could not finish.
const CHECKPOINT_BACKOFF: Duration = Duration::from_secs(1);
/// How long a process goes without the write queue after it could not be opened.
const QUEUE_RETRY: Duration = Duration::from_secs(1);

pub struct SqliteStore {
    /// None until the first call, and after the file was found removed, replaced or corrupt:
    /// the next call opens the path anew.
    conn: Option<Connection>,
    path: PathBuf,
    max_entries: u64,
    budget: Budget,
    clock: Clock,
    log: Arc<OpsLog>,
    /// When the path was last compared with the open file.
    checked_at: Instant,
    /// Counts not written yet that belong to no bucket (reopening, clock regressions, and the
    /// callers' unwritten counts), written by its next write, within a second, or by
    /// [`Store::flush`].
    noted: Counters,
    /// Buckets denied from a snapshot since the last write: their denials, written into their
    /// rows (so that `top` sees them), and the recency to give them (so that a hammered
    /// bucket never looks idle to eviction).
    touched: HashMap<Pseudonym, Touch>,
    /// When the counts above were last written.
    flushed_at: Instant,
    /// Buckets whose last decision here was an admission (see [`Store::acquire`]).
    admitting: HashSet<Pseudonym>,
    /// The host's write queue (see [`queue`]), opened with the connection. None while it
    /// cannot be opened: then calls wait by polling SQLite's lock, as without it.
    queue: Option<queue::Queue>,
    /// Connections and queue files opened: with the queue's count of refills, the epoch a
    /// deny cache watches (a new file starts its count afresh).
    opened: u64,
    /// When to try opening the queue again after it could not be.
    queue_retry_at: Option<Instant>,
    /// The WAL's length in frames after this connection's last commit (its WAL hook).
    wal_frames: Arc<AtomicI32>,
    /// Before this time, this process leaves checkpoints to others (see [`Self::checkpoint`]).
    checkpoint_backoff_until: Option<Instant>,
}

impl SqliteStore {
    /// A store of the database at `path`, opened (created if needed) on its first call. Call
    /// after fork, never before.
    pub fn new(
        path: &Path,
        busy_timeout_ms: u64,
        max_entries: u64,
        clock: Clock,
        log: Arc<OpsLog>,
    ) -> Self {
        Self {
            conn: None,
            path: path.to_owned(),
            max_entries,
            budget: Budget::new(Duration::from_millis(busy_timeout_ms)),
            clock,
            log,
            checked_at: Instant::now(),
            noted: Counters::default(),
            touched: HashMap::new(),
            flushed_at: Instant::now(),
            admitting: HashSet::new(),
            queue: None,
            opened: 0,
            queue_retry_at: None,
            wal_frames: Arc::new(AtomicI32::new(0)),
            checkpoint_backoff_until: None,
        }
    }

    /// A store opened now: an error if the file cannot be opened.
    pub fn open(
        path: &Path,
        busy_timeout_ms: u64,
        max_entries: u64,
        clock: Clock,
    ) -> Result<Self, StoreError> {
        let mut store = Self::new(path, busy_timeout_ms, max_entries, clock, OpsLog::none());
        store.connection()?;
        Ok(store)
    }

    /// The open connection, opening the path first when there is none, or when the file it
    /// has open was removed, renamed or replaced (checked at most once per [`MOVED_CHECK`]).
    fn connection(&mut self) -> Result<&Connection, StoreError> {
        if let Some(conn) = &self.conn {
            if self.checked_at.elapsed() >= MOVED_CHECK {
                self.checked_at = Instant::now();
                let mut moved = 0;
                let _ = conn.file_control(Some("main"), FileControl::HasMoved(&mut moved));
                if moved != 0 {
                    self.retire();
                    self.noted.reopened += 1;
                    self.log
                        .note(Event::Reopened, &self.path.display().to_string());
                }
                if self.queue.as_ref().is_some_and(|q| !q.is_current()) {
                    self.queue = None;
                }
            }
        }
        if self.conn.is_none() {
            self.budget.arm_for_open();
            let conn = self.connect()?;
            self.conn = Some(conn);
            self.opened += 1;
            self.checked_at = Instant::now();
        }
        if self.queue.as_ref().is_some_and(queue::Queue::is_stale) {
            // Truncated, re-initialised or damaged under us (the last call went without it).
            self.queue = None;
            let path = queue::Queue::path_for(&self.path);
            self.log
                .note(Event::StateFileDamaged, &path.display().to_string());
        }
        if self.queue.is_none() && self.queue_retry_at.is_none_or(|t| Instant::now() >= t) {
            self.open_queue();
        }
        Ok(self.conn.as_ref().expect("opened above"))
    }

    /// Opens the host's write queue. It is only an optimisation (see [`queue`]): when it
    /// cannot be opened (a file that is not ours, a full disk), calls go without it, the
    /// operations log says so, and it is tried again a second later.
    fn open_queue(&mut self) {
        let path = queue::Queue::path_for(&self.path);
        match queue::Queue::open(&path) {
            Ok(q) => {
                self.queue = Some(q);
                self.opened += 1;
                self.queue_retry_at = None;
            }
            Err(e) => {
                self.queue_retry_at = Some(Instant::now() + QUEUE_RETRY);
                self.log.note(Event::QueueUnusable, &e.to_string());
            }
        }
    }

    /// After a commit that left the WAL at [`CHECKPOINT_FRAMES`] or more: copies it into the
    /// database and has the next writer start it from the beginning (`RESTART`).
    ///
    /// Why not SQLite's automatic checkpoint: it is `PASSIVE`, which never waits, and with
    /// several workers writing there is always a frame newer than what it copied, so the WAL
    /// never restarts; it grows, and from then on every commit checkpoints again (two
    /// fsyncs). Measured with 6 php-fpm workers admitting on one subject (`strace -c -f` of
    /// one worker): 0.4 fsync per request, the WAL at 4.7 MB. A `RESTART` waits (at most
    /// [`CHECKPOINT_WAIT`]) until the transactions in flight end, so the WAL stays about
    /// `CHECKPOINT_FRAMES` pages long and costs two fsyncs per that many frames. One that
    /// cannot finish in time (a worker stopped inside a transaction) is left to others for
    /// [`CHECKPOINT_BACKOFF`], so a stuck reader never slows every commit.
    fn checkpoint(&mut self) {
        if self.wal_frames.load(Ordering::Relaxed) < CHECKPOINT_FRAMES
            || self
                .checkpoint_backoff_until
                .is_some_and(|t| Instant::now() < t)
        {
            return;
        }
        let Some(conn) = &self.conn else { return };
        self.budget.arm_for(CHECKPOINT_WAIT);
        let done = matches!(
            conn.wal_checkpoint_v2(Some(rusqlite::MAIN_DB), CheckpointMode::RESTART),
            Ok((frames, copied)) if frames == copied
        );
        self.wal_frames.store(0, Ordering::Relaxed);
        self.checkpoint_backoff_until = (!done).then(|| Instant::now() + CHECKPOINT_BACKOFF);
    }

    /// Closes a connection whose file is no longer (or no longer validly) at the path, without
    /// letting SQLite delete `-wal`/`-shm` by name on close: those names may already belong to
    /// the new database.
    fn retire(&mut self) {
        if let Some(conn) = self.conn.take() {
            close_keeping_sidecars(conn);
        }
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let cannot_open = |e: std::io::Error| {
            StoreError::new(
                ErrorKind::Misconfigured,
                format!("cannot open database {}", self.path.display()),
            )
            .with_source(e)
        };
        // A file that is not there yet is created under the directory lock, with any stale
        // -wal/-shm cleared first; one that exists is opened without it.
        let _lock = if self.path.exists() {
            None
        } else {
            let deadline = Instant::now() + self.budget.time_left().unwrap_or_default();
            match file::DirLock::acquire(&self.path, deadline).map_err(cannot_open)? {
                Some(lock) => {
                    file::clear_stale_sidecars(&self.path).map_err(|e| {
                        StoreError::new(ErrorKind::Io, format!("database {}", self.path.display()))
                            .with_source(e)
                    })?;
                    Some(lock)
                }
                None => return Err(StoreError::new(ErrorKind::Busy, "the database is busy")),
            }
        };
        // The file must be ours (it is created here, 0600, when missing), and no link is
        // followed: see crate::trust.
        crate::trust::check_database(&self.path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut conn =
            Connection::open_with_flags(&self.path, flags).map_err(|e| self.cannot_open(e))?;
        conn.busy_handler(Some(self.budget.handler()))
            .map_err(|e| self.classify(e))?;
        // Our own hook replaces SQLite's automatic checkpoint (see `checkpoint`): it only
        // notes the WAL's length; the checkpoint runs after the transaction, outside SQLite.
        let frames = Arc::clone(&self.wal_frames);
        conn.wal_hook(Some(move |_: &mut Wal, n: i32| {
            frames.store(n, Ordering::Relaxed);
            Ok(())
        }))
        .map_err(|e| self.classify(e))?;
        // Every statement of the hot path stays prepared.
        conn.set_prepared_statement_cache_capacity(32);
        // Switching a new file to WAL and creating the schema can report busy without calling
        // the handler (e.g. while another process runs WAL recovery): retry until the deadline,
        // so that workers racing on a fresh file wait rather than answer "unavailable".
        loop {
            match schema::init(&conn).map_err(|e| self.classify(e)) {
                Err(e) if e.kind() == ErrorKind::Busy => match self.budget.time_left() {
                    Some(left) => std::thread::sleep(Duration::from_micros(500).min(left)),
                    None => return Err(e),
                },
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    self.quarantine(conn);
                    return Err(e);
                }
                Err(e) => return Err(e),
                Ok(schema::Schema::Newer(v)) => {
                    return Err(StoreError::new(
                        ErrorKind::Misconfigured,
                        format!(
                            "database {} was made by a newer build of ratelimit (schema {v}, this \
                             build knows {}): run one build on it, or give this one another \
                             ratelimit.db_path",
                            self.path.display(),
                            schema::SCHEMA_VERSION
                        ),
                    ))
                }
                Ok(schema::Schema::Ready) => {
                    // -wal and -shm exist now: give them the database's mode.
                    crate::trust::match_companion_modes(&self.path)?;
                    return Ok(conn);
                }
            }
        }
    }

    /// Moves the corrupt file that `conn` has open aside, once: under the directory lock, and
    /// only while the path still names that file (another process may have done it already),
    /// then closes `conn`, still under the lock. The next call creates a fresh database. Best
    /// effort: a failure leaves the file where it is (every call then answers "unavailable").
    fn quarantine(&self, conn: Connection) {
        let deadline = Instant::now() + self.budget.time_left().unwrap_or_default();
        let lock = file::DirLock::acquire(&self.path, deadline);
        let mut moved = 0;
        let _ = conn.file_control(Some("main"), FileControl::HasMoved(&mut moved));
        if matches!(lock, Ok(Some(_))) && moved == 0 {
            let unix = ((self.clock)() / 1000).max(0) as u64;
            if file::move_aside(&self.path, unix).is_ok() {
                self.log
                    .note(Event::CorruptMovedAside, &self.path.display().to_string());
            }
        }
        close_keeping_sidecars(conn);
        drop(lock);
    }

    /// Turns SQLite's error into the store's, naming the file (never a subject).
    fn classify(&self, source: rusqlite::Error) -> StoreError {
        let path = self.path.display();
        let (kind, what) = match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                return StoreError::new(ErrorKind::Busy, "the database is busy")
            }
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => (
                ErrorKind::Corrupt,
                format!("database {path} is corrupt or not a database"),
            ),
            Some(ErrorCode::CannotOpen) => return self.cannot_open(source),
            Some(ErrorCode::DiskFull) => (ErrorKind::Full, format!("database {path}")),
            _ => (ErrorKind::Io, format!("database {path}")),
        };
        StoreError::new(kind, what).with_source(source)
    }

    /// A file that exists but cannot be opened (a read-only file system, an I/O error) is a
    /// storage fault; a path where no file can be made is for the operator to fix.
    fn cannot_open(&self, source: rusqlite::Error) -> StoreError {
        let kind = if self.path.exists() {
            ErrorKind::Io
        } else {
            ErrorKind::Misconfigured
        };
        StoreError::new(
            kind,
            format!("cannot open database {}", self.path.display()),
        )
        .with_source(source)
    }

    /// After a failed step: a corrupt file is moved aside and its connection closed, so the
    /// next call rebuilds it. (After other faults the connection stays: it works again once
    /// the fault ends, e.g. when space is freed.)
    fn after_fault(&mut self, e: &StoreError) {
        if e.kind() == ErrorKind::Corrupt {
            if let Some(conn) = self.conn.take() {
                self.quarantine(conn);
            }
        }
    }

    /// Runs `f` in one write transaction, with `now` read once the lock is held, and adds its
    /// counts (and the `unwritten` ones) to the stats row in the same transaction. A failure
    /// or a panic anywhere in it rolls everything back (see [`WriteTx`]).
    fn write<T>(
        &mut self,
        unwritten: &Counters,
        f: impl FnOnce(&Connection, &mut Delta, i64) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.connection()?;
        self.budget.arm();
        let mut delta = Delta {
            counters: *unwritten,
            ..Delta::default()
        };
        delta.counters.add(&self.noted);
        let conn = self.conn.as_ref().expect("opened above");
        // In the queue first, for half the budget at most (see `queue`: held until the
        // transaction ends, also when a panic unwinds), then SQLite's lock with what is left.
        let held = self
            .queue
            .as_mut()
            .and_then(|q| q.enter(self.budget.time_left().map(|left| left / 2)));
        let touched = &self.touched;
        let result = (|| {
            let tx = WriteTx::begin(conn)?;
            // First the denials from snapshots and their buckets' recency, so that eviction in
            // `f` sees them as used (and folds their counts into the totals if it drops them).
            for (bucket, touch) in touched {
                counts::write_touch(conn, bucket, touch, &mut delta)?;
            }
            let out = f(conn, &mut delta, (self.clock)())?;
            counts::flush(conn, &delta)?;
            tx.commit()?;
            Ok(out)
        })();
        drop(held);
        match result {
            Ok(out) => {
                if delta.counters.evicted > unwritten.evicted + self.noted.evicted {
                    self.log
                        .note(Event::TableFull, &self.path.display().to_string());
                }
                if delta.counters.evicted > 0 || delta.refilled {
                    if let Some(q) = &self.queue {
                        q.refilled();
                    }
                }
                self.noted = Counters::default();
                self.touched.clear();
                self.flushed_at = Instant::now();
                self.checkpoint();
                Ok(out)
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Classifies a failed step's error and acts on it: see [`Self::after_fault`]. A
    /// connection that found its file read-only (or unopenable) is closed too, so that the next
    /// call opens the path anew once the file system is writable again.
    fn failed(&mut self, e: rusqlite::Error) -> StoreError {
        let reopen = matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
        );
        let e = self.classify(e);
        self.after_fault(&e);
        if reopen {
            self.retire();
        }
        e
    }

    /// Runs a read on the connection, with a fresh wait budget.
    fn read<T>(
        &mut self,
        f: impl FnOnce(&Connection, i64) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.connection()?;
        self.budget.arm();
        let now = (self.clock)();
        let result = f(self.conn.as_ref().expect("opened above"), now);
        result.map_err(|e| self.failed(e))
    }
}

impl SqliteStore {
    /// Writes the held-back counts when the last write is a second old or more. Best effort:
    /// on failure they stay held back.
    pub fn flush_if_due(&mut self) {
        let pending = !self.noted.is_zero() || !self.touched.is_empty();
        if pending && self.flushed_at.elapsed() >= FLUSH_EVERY {
            let _ = self.write(&Counters::default(), |_, _, _| Ok(()));
        }
    }

    /// Remembers which buckets this process last saw admitting (a bounded set: a hint only,
    /// since the write transaction always decides again).
    fn note_admitting(&mut self, key: &BucketKey, allowed: bool) {
        if allowed {
            if self.admitting.len() >= ADMITTING_MAX {
                self.admitting.clear();
            }
            self.admitting.insert(key.bucket);
        } else {
            self.admitting.remove(&key.bucket);
        }
    }

    /// A denial decided from a read snapshot, without the write lock: exact, because between
    /// the snapshot and now other writers can only have taken tokens (or slots), and time can
    /// only have added what the refill computes, so a denial then is a denial now. None when
    /// the snapshot allows (the write transaction decides again) or holds no bucket.
    ///
    /// A call with a request id reads its record in the same snapshot: judged a plain call,
    /// it is denied here as any other; in progress (the first admission's lease was live in
    /// the snapshot) it is answered here too; only a replay (which counts down the record's
    /// replays left) or an admission goes to the write transaction.
    fn deny_from_snapshot(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
    ) -> Result<Option<Acquired>, StoreError> {
        let found = self.read(|conn, now| {
            // One statement is a snapshot by itself; slots and a record need more in the same.
            if ask.max_inflight == 0 && ask.request.is_none() {
                return Ok(
                    read_bucket(conn, key)?.map(|s| (s, Slots::default(), Judgement::Fresh, now))
                );
            }
            let tx = ReadTx::begin(conn)?;
            let Some(stored) = read_bucket(conn, key)? else {
                return Ok(None);
            };
            let slots = if ask.max_inflight > 0 {
                live_slots_at(conn, key, now)?
            } else {
                Slots::default()
            };
            let judged = match &ask.request {
                Some(r) => requests::judge(conn, key, r, now)?,
                None => Judgement::Fresh,
            };
            tx.end()?;
            Ok(Some((stored, slots, judged, now)))
        })?;
        let Some((stored, slots, judged, now)) = found else {
            return Ok(None);
        };
        let verdict = match judged {
            Judgement::Replay => return Ok(None),
            Judgement::InProgress { until } => {
                decision::in_progress(Some(stored.bucket), &ask.policy, until, now, ask.dry_run)
            }
            Judgement::Fresh => {
                let d = decision::decide(Some(stored.bucket), ask, slots, now);
                if d.verdict.took()
                    || decision::denial_writes(&stored.bucket, &d.bucket, &ask.policy)
                {
                    return Ok(None);
                }
                self.noted.clock_regressions += u64::from(d.clock_regressed);
                d.verdict
            }
        };
        self.note_admitting(key, false);
        // The reason goes into the bucket's row with the recency (see `touched`); what a
        // shadow scope answered instead, and a retry in progress, are totals only.
        self.noted.dry_run_denied += u64::from(verdict.dry_run);
        if verdict.reason == Reason::InProgress {
            self.noted.record(Reason::InProgress);
        }
        let used_at = evict::used_at(now);
        let touch = self.touched.entry(key.bucket).or_default();
        touch.count(verdict.reason);
        if used_at > stored.used_at {
            touch.used_at = touch.used_at.max(used_at);
        }
        Ok(Some(Acquired {
            verdict,
            lease: None,
        }))
    }
}

fn read_key_record(conn: &Connection) -> rusqlite::Result<Option<KeyRecord>> {
    conn.prepare_cached(
        "SELECT fingerprint, path, host, previous, since FROM keyring WHERE id = 0",
    )?
    .query_row([], |r| {
        Ok(KeyRecord {
            fingerprint: r.get(0)?,
            path: r.get(1)?,
            host: r.get(2)?,
            previous: r.get(3)?,
            since_ms: r.get(4)?,
        })
    })
    .optional()
}

/// During a key rotation: the bucket as it is stored under the previous key's pseudonym.
fn read_previous(tx: &Connection, key: &BucketKey) -> rusqlite::Result<Option<Stored>> {
    match key.previous {
        Some(previous) => read_bucket(
            tx,
            &BucketKey {
                bucket: previous,
                ..*key
            },
        ),
        None => Ok(None),
    }
}

/// During a key rotation: moves a bucket missing under the current key from its previous
/// pseudonym (tokens, time stamp, counters, live leases), counted as `keys_migrated`.
fn migrate(
    tx: &Connection,
    key: &BucketKey,
    delta: &mut Delta,
) -> rusqlite::Result<Option<Stored>> {
    let Some(previous) = key.previous else {
        return Ok(None);
    };
    let moved = tx
        .prepare_cached("UPDATE buckets SET key = ?2 WHERE key = ?1")?
        .execute([previous, key.bucket])?;
    if moved == 0 {
        return Ok(None);
    }
    tx.prepare_cached("UPDATE leases SET key = ?2 WHERE key = ?1")?
        .execute([previous, key.bucket])?;
    delta.counters.keys_migrated += 1;
    read_bucket(tx, key)
}

/// The bucket's leases still live at `now` (expired ones may not be deleted yet).
fn live_slots_at(tx: &Connection, key: &BucketKey, now: i64) -> rusqlite::Result<Slots> {
    let (live, earliest) = tx
        .prepare_cached(
            "SELECT count(*), min(expires) FROM leases WHERE key = ?1 AND expires > ?2",
        )?
        .query_row(params![key.bucket, now], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
    Ok(Slots {
        live: live as u64,
        earliest_expiry: earliest,
    })
}

/// Closes a connection without letting SQLite delete `-wal`/`-shm` by name, as the last
/// connection of a file does: the file is no longer at its path, and those names may already
/// belong to a new database.
fn close_keeping_sidecars(conn: Connection) {
    let mut persist = 1;
    let _ = conn.file_control(Some("main"), FileControl::PersistWal(&mut persist));
    drop(conn);
}

impl Store for SqliteStore {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<Acquired, StoreError> {
        // Drawn before the transaction, so that the write lock is held no longer than needed.
        let lease_id = super::lease_id_for(ask)?;
        // A bucket this process last saw admitting will likely admit again: straight to the
        // write lock, without a snapshot first (which would cost an admission a read more).
        // A call with a request id reads its record in the snapshot too (see there).
        if !self.admitting.contains(&key.bucket) {
            if let Some(denied) = self.deny_from_snapshot(key, ask)? {
                // Written later (see `noted`): the caller's counts are in our hands now.
                self.noted.add(unwritten);
                self.flush_if_due();
                return Ok(denied);
            }
        }
        let max_entries = self.max_entries;
        let decided = self.write(unwritten, |tx, delta, now| {
            if let Some(request) = &ask.request {
                if let Some(verdict) = requests::answered(tx, key, ask, request, now, delta)? {
                    return Ok(Acquired {
                        verdict,
                        lease: None,
                    });
                }
            }
            let stored = match read_bucket(tx, key)? {
                None => migrate(tx, key, delta)?,
                found => found,
            };
            // Leases only matter to calls that take one (and to make_room, which expires them
            // itself): a plain rate check touches no lease page.
            let slots = if ask.max_inflight > 0 {
                evict::expire_leases(tx, now, delta)?;
                live_slots_at(tx, key, now)?
            } else {
                Slots::default()
            };
            if stored.is_none() {
                if !evict::make_room(tx, now, max_entries, delta)? {
                    let verdict = Verdict::unavailable(false);
                    delta.counters.record(verdict.reason);
                    return Ok(Acquired {
                        verdict,
                        lease: None,
                    });
                }
                delta.entries += 1;
            }
            let d = decision::decide(stored.as_ref().map(|s| s.bucket), ask, slots, now);
            delta.counters.clock_regressions += u64::from(d.clock_regressed);
            // This decision's count goes into its bucket's row (see counts.rs). It is written on
            // denials too: `used_at` keeps a hammered subject from looking idle.
            write_bucket(
                tx,
                key,
                stored.as_ref(),
                &d.bucket,
                &ask.policy,
                Some(d.verdict.reason),
                now,
                delta,
            )?;
            let lease = match lease_id {
                Some(id) if d.verdict.took() => {
                    tx.prepare_cached("INSERT INTO leases (id, key, expires) VALUES (?1, ?2, ?3)")?
                        .execute(params![id.0, key.bucket, lease::expiry(now, lease_ttl_ms)])?;
                    let key = BucketKey {
                        previous: None,
                        ..*key
                    };
                    Some(LeaseToken { id, key })
                }
                _ => None,
            };
            delta.counters.dry_run_denied += u64::from(d.verdict.dry_run);
            if let Some(request) = ask.request.as_ref().filter(|_| d.verdict.took()) {
                requests::remember(
                    tx,
                    key,
                    request,
                    lease.as_ref(),
                    (now, lease_ttl_ms),
                    max_entries,
                    delta,
                )?;
            }
            Ok(Acquired {
                verdict: d.verdict,
                lease,
            })
        });
        if let Ok(a) = &decided {
            self.note_admitting(key, a.verdict.took());
        }
        decided
    }

    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        unwritten: &Counters,
    ) -> Result<AcquiredAll, StoreError> {
        let first = asks[0];
        let lease_id = super::lease_id_for(&first)?;
        let max_entries = self.max_entries;
        // No snapshot path: a compound denial is rarer and reads several buckets; it is always
        // decided under the write lock.
        self.write(unwritten, |tx, delta, now| {
            let mut stored = Vec::with_capacity(keys.len());
            for key in keys {
                stored.push(match read_bucket(tx, key)? {
                    None => migrate(tx, key, delta)?,
                    found => found,
                });
            }
            if let Some(request) = &first.request {
                let buckets: Vec<Option<Bucket>> = stored
                    .iter()
                    .map(|s| s.as_ref().map(|s| s.bucket))
                    .collect();
                if let Some(answer) =
                    requests::answered_all(tx, keys, asks, request, &buckets, now, delta)?
                {
                    return Ok(answer);
                }
            }
            let slots = if first.max_inflight > 0 {
                evict::expire_leases(tx, now, delta)?;
                live_slots_at(tx, &keys[0], now)?
            } else {
                Slots::default()
            };
            for _ in stored.iter().filter(|s| s.is_none()) {
                if !evict::make_room(tx, now, max_entries, delta)? {
                    let a = AcquiredAll::unavailable(keys.len(), false);
                    delta.counters.record(a.verdict.reason);
                    return Ok(a);
                }
                delta.entries += 1;
            }
            let buckets: Vec<Option<Bucket>> = stored
                .iter()
                .map(|s| s.as_ref().map(|s| s.bucket))
                .collect();
            let d = compound::decide_all(&buckets, asks, slots, now);
            delta.counters.clock_regressions += u64::from(d.clock_regressed);
            for (i, (key, b)) in keys.iter().zip(&d.buckets).enumerate() {
                let counted = (i == d.reported).then_some(d.verdict.reason);
                write_bucket(
                    tx,
                    key,
                    stored[i].as_ref(),
                    b,
                    &asks[i].policy,
                    counted,
                    now,
                    delta,
                )?;
            }
            let lease = match lease_id {
                Some(id) if d.verdict.took() => {
                    tx.prepare_cached("INSERT INTO leases (id, key, expires) VALUES (?1, ?2, ?3)")?
                        .execute(params![
                            id.0,
                            keys[0].bucket,
                            lease::expiry(now, lease_ttl_ms)
                        ])?;
                    let key = BucketKey {
                        previous: None,
                        ..keys[0]
                    };
                    Some(LeaseToken { id, key })
                }
                _ => None,
            };
            delta.counters.dry_run_denied += u64::from(d.verdict.dry_run);
            if let Some(request) = first.request.as_ref().filter(|_| d.verdict.took()) {
                requests::remember(
                    tx,
                    &keys[0],
                    request,
                    lease.as_ref(),
                    (now, lease_ttl_ms),
                    max_entries,
                    delta,
                )?;
            }
            Ok(AcquiredAll {
                verdict: d.verdict,
                each: d.each,
                reported: d.reported,
                lease,
            })
        })
    }

    fn peek(&mut self, key: &BucketKey, policy: &Policy) -> Result<Verdict, StoreError> {
        let (stored, now) = self.read(|conn, now| {
            let stored = match read_bucket(conn, key)? {
                None => read_previous(conn, key)?,
                found => found,
            };
            Ok((stored, now))
        })?;
        Ok(decision::peek(stored.map(|s| s.bucket), policy, now))
    }

    fn release(&mut self, leases: &[LeaseToken], unwritten: &Counters) -> Result<u64, StoreError> {
        self.write(unwritten, |tx, delta, now| {
            let mut freed = 0;
            for t in leases {
                let n = tx
                    .prepare_cached(
                        "DELETE FROM leases WHERE id = ?1 AND key = ?2 AND expires > ?3",
                    )?
                    .execute(params![t.id.0, t.key.bucket, now])?;
                if n > 0 {
                    // Its bucket may be full already, and drained once this was its last lease.
                    if let Some(s) = read_bucket(tx, &t.key)? {
                        delta.drainable_at(s.full_at);
                    }
                }
                freed += n as u64;
            }
            Ok(freed)
        })
    }

    fn reset(&mut self, key: &BucketKey, unwritten: &Counters) -> Result<bool, StoreError> {
        self.write(unwritten, |tx, delta, _| {
            let buckets = counts::delete_buckets(
                tx,
                "DELETE FROM buckets WHERE key = ?1 RETURNING allowed, denied_rate, denied_inflight",
                [key.bucket],
                delta,
            )?;
            let mut leases = tx
                .prepare_cached("DELETE FROM leases WHERE key = ?1")?
                .execute([key.bucket])?;
            let mut buckets = buckets;
            if let Some(previous) = key.previous {
                buckets += counts::delete_buckets(
                    tx,
                    "DELETE FROM buckets WHERE key = ?1 RETURNING allowed, denied_rate, denied_inflight",
                    [previous],
                    delta,
                )?;
                leases += tx
                    .prepare_cached("DELETE FROM leases WHERE key = ?1")?
                    .execute([previous])?;
            }
            delta.refilled = buckets > 0;
            Ok(buckets > 0 || leases > 0)
        })
    }

    fn refill_epoch(&mut self) -> RefillEpoch {
        // `opened` moves with every queue file opened: a count of another file (one made
        // anew after a truncation) is never taken for this one's.
        match self.queue.as_mut().and_then(queue::Queue::refills) {
            Some(count) => RefillEpoch::At(self.opened, count),
            None => RefillEpoch::Unknown,
        }
    }

    fn counts_denials_in_buckets(&self) -> bool {
        true
    }

    /// A deny cache's denials, counted as those from snapshots are: into the buckets' rows with
    /// their recency, by this process's next write (or within a second, or at its end).
    fn add_denials(&mut self, denials: &[(BucketKey, u64)]) -> Result<(), StoreError> {
        let used_at = evict::used_at((self.clock)());
        for (key, n) in denials {
            let touch = self.touched.entry(key.bucket).or_default();
            touch.denied_rate += n;
            touch.used_at = touch.used_at.max(used_at);
        }
        self.flush_if_due();
        Ok(())
    }

    fn stats(&mut self) -> Result<Stats, StoreError> {
        self.flush_if_due();
        let mut s = self.read(counts::read)?;
        s.counters.add(&self.noted);
        for touch in self.touched.values() {
            s.counters.add(&touch.counters());
        }
        Ok(s)
    }

    fn top(&mut self, n: usize) -> Result<Vec<BucketView>, StoreError> {
        self.flush_if_due();
        // Cloned: the read needs the store mutably (its connection). At most one second of
        // this process's denials.
        let touched = self.touched.clone();
        self.read(|conn, now| counts::top(conn, now, n, &touched))
    }

    fn tick(&mut self) {
        self.flush_if_due();
    }

    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        self.read(|conn, _| read_key_record(conn))
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        self.write(&Counters::default(), |tx, _, now| {
            if read_key_record(tx)?.map(|r| r.fingerprint).as_ref() != expected {
                return Ok(false);
            }
            let since = match new.since_ms {
                STAMP_NOW => now,
                s => s,
            };
            tx.prepare_cached(
                "INSERT OR REPLACE INTO keyring (id, fingerprint, path, host, previous, since)
                 VALUES (0, ?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                new.fingerprint,
                new.path,
                new.host,
                new.previous,
                since
            ])?;
            Ok(true)
        })
    }

    fn flush(&mut self, unwritten: &Counters) -> Result<(), StoreError> {
        if unwritten.is_zero() && self.noted.is_zero() && self.touched.is_empty() {
            return Ok(());
        }
        self.write(unwritten, |_, _, _| Ok(()))
    }
}

impl Drop for SqliteStore {
    /// Writes what is still pending (a process ending normally loses no count); best effort.
    fn drop(&mut self) {
        if self.conn.is_some() {
            let _ = self.flush(&Counters::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::bucket::Policy;
    use std::sync::Arc;

    fn key() -> BucketKey {
        BucketKey {
            bucket: [1; 16],
            group: [2; 16],
            previous: None,
        }
    }

    fn ask() -> Ask {
        Ask::new(Policy::new(5, 60_000).unwrap(), 1, 0)
    }

    fn open(path: &Path, busy_timeout_ms: u64) -> SqliteStore {
        SqliteStore::open(path, busy_timeout_ms, 100, Arc::new(|| 1_700_000_000_000)).unwrap()
    }

    /// The fault found on review: a panic between BEGIN and COMMIT (caught by the PHP glue,
    /// so the worker lives on) must not leave this connection holding the write lock.
    #[test]
    fn a_panic_inside_a_transaction_releases_the_write_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        let mut panicking = open(&path, 100);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = panicking.write(&Counters::default(), |tx, _, _| -> rusqlite::Result<()> {
                tx.execute("DELETE FROM stats", [])?;
                panic!("injected inside the transaction");
            });
        }));
        assert!(caught.is_err(), "the injected panic did not happen");
        // Another worker, with no wait budget at all, decides at once: the lock is free...
        let mut other = open(&path, 0);
        let a = other.acquire(&key(), &ask(), 60_000, &Counters::default());
        assert!(a.as_ref().is_ok_and(|a| a.verdict.allowed), "{a:?}");
        // ...nothing of the panicked transaction stayed, and its worker decides normally too.
        let a = panicking.acquire(&key(), &ask(), 60_000, &Counters::default());
        assert_eq!(a.unwrap().verdict.remaining, 3);
        assert_eq!(other.stats().unwrap().counters.allowed, 2);
    }

    #[test]
    fn a_panic_inside_a_transaction_releases_the_write_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        let mut panicking = open(&path, 100);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = panicking.write(&Counters::default(), |_, _, _| -> rusqlite::Result<()> {
                panic!("injected inside the transaction");
            });
        }));
        let mut q = queue::Queue::open(&queue::Queue::path_for(&path)).unwrap();
        assert!(q.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn a_stopped_queue_holder_delays_a_decision_by_half_a_budget_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        let mut s = open(&path, 1_000);
        s.acquire(&key(), &ask(), 60_000, &Counters::default())
            .unwrap();
        let mut child = queue::tests::holder(&queue::Queue::path_for(&path));
        queue::tests::signal(&child, libc::SIGSTOP);
        // SQLite's lock is free: the call decides, after waiting half its budget in the
        // queue...
        let t = Instant::now();
        let a = s.acquire(&key(), &ask(), 60_000, &Counters::default());
        let waited = t.elapsed();
        assert_eq!(a.unwrap().verdict.remaining, 3);
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        // ...and the next one goes straight to SQLite's lock.
        let t = Instant::now();
        let a = s.acquire(&key(), &ask(), 60_000, &Counters::default());
        assert_eq!(a.unwrap().verdict.remaining, 2);
        let took = t.elapsed();
        assert!(took < Duration::from_millis(400), "{took:?}");
        queue::tests::signal(&child, libc::SIGKILL);
        child.wait().unwrap();
    }

    fn wal_len(path: &Path) -> u64 {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(wal).map_or(0, |m| m.len())
    }

    /// `n` admissions on 40 buckets of this thread's.
    fn admit_many(path: &Path, thread: u8, n: usize) {
        let mut s = open(path, 5_000);
        let ask = Ask::new(Policy::new(1_000_000_000, 1_000).unwrap(), 1, 0);
        for i in 0..n {
            let mut k = key();
            k.bucket = [
                thread,
                (i % 40) as u8,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ];
            let a = s.acquire(&k, &ask, 60_000, &Counters::default()).unwrap();
            assert!(a.verdict.allowed);
        }
    }

    #[test]
    fn the_wal_stays_short_while_workers_write_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        admit_many(&path, 9, 1);
        // Open throughout: the last connection to close checkpoints the whole WAL away.
        let open = Connection::open(&path).unwrap();
        open.query_row("SELECT count(*) FROM stats", [], |_| Ok(()))
            .unwrap();
        std::thread::scope(|scope| {
            for t in 0..3 {
                let path = &path;
                scope.spawn(move || admit_many(path, t, 4_000));
            }
        });
        // 12,000 commits of a page or more: without checkpoints, 12 MB and more (17 MB
        // measured). Ours keep the WAL near CHECKPOINT_FRAMES pages (a frame is a 1 KiB page
        // and a 24-byte header); the bound leaves room for checkpoints that a loaded machine
        // made wait past CHECKPOINT_WAIT, each leaving its process's to others for a second.
        let bound = 6 * CHECKPOINT_FRAMES as u64 * (1_024 + 24);
        assert!(wal_len(&path) <= bound, "{} > {bound}", wal_len(&path));
    }

    #[test]
    fn a_reader_stuck_in_a_snapshot_slows_one_checkpoint_a_second_not_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.sqlite");
        admit_many(&path, 0, 10);
        // A worker stopped inside a read transaction: no checkpoint can finish past it.
        let reader = Connection::open(&path).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM buckets;")
            .unwrap();
        let t = Instant::now();
        admit_many(&path, 1, 3 * CHECKPOINT_FRAMES as usize);
        let took = t.elapsed();
        // Each commit over the threshold waiting CHECKPOINT_WAIT would take 20 s and more;
        // with the back-off it is one wait (per second), and the commits, well under 10 s
        // even on a loaded machine.
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert!(
            wal_len(&path) > CHECKPOINT_FRAMES as u64 * 1_024,
            "no frame was kept"
        );
        reader.execute_batch("COMMIT").unwrap();
    }
}
