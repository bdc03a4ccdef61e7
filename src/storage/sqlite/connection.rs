//! The connection's life: opened lazily on the first call, opened anew when the file at the
//! path was removed, replaced or found corrupt (the corrupt one moved aside once), with the
//! host's write queue beside it and checkpoints kept short; and SQLite's errors turned into the
//! store's.

use super::{file, queue, schema, SqliteStore};
use crate::opslog::Event;
use crate::storage::{ErrorKind, StoreError};
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, ErrorCode, FileControl, OpenFlags};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a process checks that the path still names the file it has open.
const MOVED_CHECK: Duration = Duration::from_secs(1);
/// WAL frames (pages) from which a commit checkpoints: SQLite's own default threshold.
pub(super) const CHECKPOINT_FRAMES: i32 = 1_000;
/// How long a checkpoint may wait for other workers' transactions to end.
const CHECKPOINT_WAIT: Duration = Duration::from_millis(10);
/// How long a process leaves checkpoints to others after one could not finish.
const CHECKPOINT_BACKOFF: Duration = Duration::from_secs(1);
/// How long a process goes without the write queue after it could not be opened.
const QUEUE_RETRY: Duration = Duration::from_secs(1);

impl SqliteStore {
    /// The open connection, opening the path first when there is none, or when the file it
    /// has open was removed, renamed or replaced (checked at most once per [`MOVED_CHECK`]).
    pub(super) fn connection(&mut self) -> Result<&Connection, StoreError> {
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
            if self.open_stayed_busy {
                self.budget.arm();
            } else {
                self.budget.arm_for_open();
            }
            let conn = self.connect().inspect_err(|e| {
                self.open_stayed_busy = e.kind() == ErrorKind::Busy;
            })?;
            self.open_stayed_busy = false;
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
    pub(super) fn checkpoint(&mut self) {
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
    pub(super) fn retire(&mut self) {
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
    pub(super) fn classify(&self, source: rusqlite::Error) -> StoreError {
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
    pub(super) fn after_fault(&mut self, e: &StoreError) {
        if e.kind() == ErrorKind::Corrupt {
            if let Some(conn) = self.conn.take() {
                self.quarantine(conn);
            }
        }
    }
}

/// Closes a connection without letting SQLite delete `-wal`/`-shm` by name, as the last
/// connection of a file does: the file is no longer at its path, and those names may already
/// belong to a new database.
fn close_keeping_sidecars(conn: Connection) {
    let mut persist = 1;
    let _ = conn.file_control(Some("main"), FileControl::PersistWal(&mut persist));
    drop(conn);
}
