//! The SQLite store: one file shared by every worker of a host.
//!
//! Each decision is one write transaction begun as a writer (`BEGIN IMMEDIATE`), so two
//! workers can never both read the same tokens and both take them. WAL with
//! `synchronous=NORMAL`: a commit is durable against a crashed process (what a killed worker
//! is) and costs no fsync; a power cut can lose the last few decisions, which only ever gives
//! tokens back to clients as if a little time had passed.

use super::{Acquired, Clock, Counters, Stats, Store, StoreError};
use crate::core::bucket::{Bucket, Policy};
use crate::core::decision::{self, Ask, Reason, Verdict};
use crate::core::lease::{self, LeaseId, Slots};
use crate::core::subject::Pseudonym;
use rand::TryRng;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS buckets (
    key     BLOB PRIMARY KEY,   -- 16-byte pseudonym of (scope, subject)
    tokens  INTEGER NOT NULL,   -- milli-tokens held
    stamp   INTEGER NOT NULL,   -- ms up to which earnings are credited
    full_at INTEGER NOT NULL,   -- ms from which the bucket is full again (droppable)
    used_at INTEGER NOT NULL,   -- ms of the last decision, to RECENCY_MS, for LRU eviction
    -- This bucket's share of the host-wide counters: kept in its own row so that a decision
    -- writes one page, folded into `stats` when the row is deleted.
    allowed INTEGER NOT NULL DEFAULT 0,
    denied_rate INTEGER NOT NULL DEFAULT 0,
    denied_inflight INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS buckets_used_at ON buckets(used_at);
CREATE TABLE IF NOT EXISTS leases (
    id      BLOB PRIMARY KEY,   -- 16 random bytes
    key     BLOB NOT NULL,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS leases_key ON leases(key, expires);
CREATE INDEX IF NOT EXISTS leases_expires ON leases(expires);
-- Host-wide counters: these plus the sums of the same columns over `buckets`.
CREATE TABLE IF NOT EXISTS stats (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    allowed INTEGER NOT NULL DEFAULT 0,
    denied_rate INTEGER NOT NULL DEFAULT 0,
    denied_inflight INTEGER NOT NULL DEFAULT 0,
    unavailable INTEGER NOT NULL DEFAULT 0,
    leases_expired INTEGER NOT NULL DEFAULT 0,
    evicted INTEGER NOT NULL DEFAULT 0,
    clock_regressions INTEGER NOT NULL DEFAULT 0,
    entries INTEGER NOT NULL DEFAULT 0   -- rows in buckets, kept in step so no COUNT(*) is needed
);
INSERT OR IGNORE INTO stats (id) VALUES (0);
";

/// Bumped whenever [`SCHEMA`] changes. An older file is emptied and rebuilt: it holds only
/// short-lived limits, which start afresh.
const SCHEMA_VERSION: i64 = 2;

const DROP_OLD_SCHEMA: &str =
    "DROP TABLE IF EXISTS buckets; DROP TABLE IF EXISTS leases; DROP TABLE IF EXISTS stats;";

/// Drained buckets dropped at once when the table is full: amortises the clean-up.
const DRAIN_BATCH: u32 = 64;
/// How many of the least recently used buckets are searched for drained ones. Bounds the
/// search, which holds the write lock (1,024 cost about 1 ms a new subject at 100,000
/// entries, 64 about 0.03 ms), and spares the hot path an index on `full_at`: an idle bucket
/// is both the likeliest to be drained and the likeliest to be near the LRU end.
const DRAIN_WINDOW: u32 = 64;

/// Recency is kept to a tenth of a second: LRU needs no more, and a bucket used again within
/// the same tenth rewrites its row without touching the `used_at` index (one page less to
/// append to the WAL per commit).
const RECENCY_MS: i64 = 100;

fn used_at(now: i64) -> i64 {
    now - now.rem_euclid(RECENCY_MS)
}

/// The busy handler: how a decision waits for another worker's write lock, until the call's
/// deadline (see [`SqliteStore::arm`]), so that no call waits longer than the timeout.
///
/// A decision holds the lock for about 10 us, but PHP-FPM runs more workers than cores, so a
/// waiter that polls fast mostly steals CPU from the holder. So a waiter first backs off
/// (0.5, 1, 2, then 4 ms, jittered), which leaves the lock to the others at full speed; in the
/// second half of its budget it polls every ~100 us, which gives the longest waiters the best
/// chance at the next free lock instead of answering "unavailable". Measured with 8 processes
/// on 2 cores hammering one file (see bench/): SQLite's own 1-100 ms sleeps gave 60k
/// decisions/s and ~0.07 % unavailable; 50 us-1.6 ms polling gave 49k/s with p99 3.3 ms; this
/// gives about 71k/s, p99 0.2 ms, none unavailable.
fn wait_for_lock(
    deadline: Arc<Mutex<Instant>>,
    timeout: Duration,
) -> impl FnMut(i32) -> bool + Send + 'static {
    // xorshift64, seeded per process, so that waiting workers do not retry in lockstep.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id()).rotate_left(32);
    move |attempt| {
        let until = *deadline.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(left) = until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        else {
            return false;
        };
        let base_us = if left < timeout / 2 {
            100
        } else {
            500u64 << attempt.clamp(0, 3)
        };
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let pause = Duration::from_micros(base_us / 2 + rng % base_us);
        std::thread::sleep(pause.min(left));
        true
    }
}

/// Changes one transaction makes to the stats row.
#[derive(Default)]
struct Delta {
    counters: Counters,
    entries: i64,
}

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    max_entries: u64,
    timeout: Duration,
    /// Until when the current call may wait for the lock; read by the busy handler.
    deadline: Arc<Mutex<Instant>>,
    /// Set by `open`: the first call after it shares open's deadline instead of a new one.
    armed_by_open: bool,
    /// Counts that could not be written (the file was busy); added by the next write.
    pending: Counters,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`. Call after fork, never before.
    /// The file must be ours (see [`crate::trust::check_database`]); no link is followed.
    pub fn open(path: &Path, busy_timeout_ms: u64, max_entries: u64) -> Result<Self, StoreError> {
        crate::trust::check_database(path).map_err(StoreError::Untrusted)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(path, flags).map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let timeout = Duration::from_millis(busy_timeout_ms);
        let deadline = Arc::new(Mutex::new(Instant::now() + timeout));
        let mut store = Self {
            conn,
            path: path.to_owned(),
            max_entries,
            timeout,
            deadline: Arc::clone(&deadline),
            armed_by_open: true,
            pending: Counters::default(),
        };
        store
            .conn
            .busy_handler(Some(wait_for_lock(deadline, timeout)))
            .map_err(|e| store.classify(e))?;
        // Every statement of the hot path stays prepared.
        store.conn.set_prepared_statement_cache_capacity(32);
        // Switching a new file to WAL and creating the schema can report busy without calling
        // the handler (e.g. while another process runs WAL recovery): retry until the deadline,
        // so that workers racing on a fresh file wait rather than answer "unavailable".
        loop {
            match store.init().map_err(|e| store.classify(e)) {
                Err(StoreError::Busy) => match store.time_left() {
                    Some(left) => std::thread::sleep(Duration::from_micros(500).min(left)),
                    None => return Err(StoreError::Busy),
                },
                other => {
                    other?;
                    // -wal and -shm exist now: give them the database's mode.
                    crate::trust::match_companion_modes(path).map_err(StoreError::Untrusted)?;
                    return Ok(store);
                }
            }
        }
    }

    fn time_left(&self) -> Option<Duration> {
        let until = *self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    /// Starts a call's wait budget: `busy_timeout_ms` from now, or what is left of `open`'s
    /// when this is the first call after it (the PHP call that opened the store).
    fn arm(&mut self) {
        if std::mem::take(&mut self.armed_by_open) {
            return;
        }
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            Instant::now() + self.timeout;
    }

    fn init(&mut self) -> rusqlite::Result<()> {
        // Every commit appends whole pages to the WAL (a decision usually writes two: its
        // bucket's and the stats row's); small pages keep that append small. Takes effect
        // only on a new, empty file.
        self.conn.execute_batch("PRAGMA page_size=1024")?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            self.conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
        }
        self.conn.execute_batch("PRAGMA synchronous=NORMAL")?;
        // Only the first process ever needs the write lock here; the others just read.
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version < SCHEMA_VERSION {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Read again under the lock: another worker may have just done this.
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version >= SCHEMA_VERSION {
                return tx.commit();
            }
            if version > 0 {
                tx.execute_batch(DROP_OLD_SCHEMA)?;
            }
            tx.execute_batch(SCHEMA)?;
            tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
            tx.commit()?;
        }
        Ok(())
    }

    fn classify(&self, source: rusqlite::Error) -> StoreError {
        let path = self.path.clone();
        match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy,
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
                StoreError::Corrupt { path, source }
            }
            Some(ErrorCode::CannotOpen) => StoreError::Open { path, source },
            _ => StoreError::Sqlite { path, source },
        }
    }

    /// Runs `f` in one write transaction, with the time read once the lock is held, and adds
    /// its counts (and any pending ones) to the stats row in the same transaction. Most
    /// decisions have none: their counts go to their bucket's row.
    fn write<T>(
        &mut self,
        clock: Clock<'_>,
        f: impl FnOnce(&Connection, &mut Delta, u64, i64) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.arm();
        let max_entries = self.max_entries;
        let mut delta = Delta {
            counters: self.pending,
            entries: 0,
        };
        // BEGIN/COMMIT as cached statements: rusqlite's Transaction would parse them anew on
        // every decision, which cost a fifth of a decision's instructions.
        self.conn
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut s| s.execute([]))
            .map_err(|e| self.classify(e))?;
        let result = (|| -> rusqlite::Result<T> {
            let tx = &self.conn;
            let out = f(tx, &mut delta, max_entries, clock())?;
            let c = &delta.counters;
            if *c != Counters::default() || delta.entries != 0 {
                tx.prepare_cached(
                    "UPDATE stats SET allowed = allowed + ?1, denied_rate = denied_rate + ?2,
                 denied_inflight = denied_inflight + ?3, unavailable = unavailable + ?4,
                 leases_expired = leases_expired + ?5, evicted = evicted + ?6,
                 clock_regressions = clock_regressions + ?7, entries = entries + ?8 WHERE id = 0",
                )?
                .execute(params![
                    c.allowed as i64,
                    c.denied_rate as i64,
                    c.denied_inflight as i64,
                    c.unavailable as i64,
                    c.leases_expired as i64,
                    c.evicted as i64,
                    c.clock_regressions as i64,
                    delta.entries
                ])?;
            }
            tx.prepare_cached("COMMIT")?.execute([])?;
            Ok(out)
        })();
        if result.is_err() && !self.conn.is_autocommit() {
            // A failed statement can leave the transaction open: roll it back so that nothing
            // of it stays and the next call can begin. (Where SQLite already rolled back by
            // itself, the connection is in autocommit and there is nothing to do.)
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
        let out = result.map_err(|e| self.classify(e))?;
        self.pending = Counters::default();
        Ok(out)
    }
}

/// A stored bucket and when it was last used.
fn read_bucket(tx: &Connection, key: &Pseudonym) -> rusqlite::Result<Option<(Bucket, i64)>> {
    tx.prepare_cached("SELECT tokens, stamp, used_at FROM buckets WHERE key = ?1")?
        .query_row([key], |r| {
            Ok((
                Bucket {
                    tokens: r.get::<_, i64>(0)?.max(0) as u64,
                    stamp: r.get(1)?,
                },
                r.get(2)?,
            ))
        })
        .optional()
}

/// Deletes the buckets `sql` selects (a `DELETE ... RETURNING` of the three per-bucket
/// counters) and folds their counts into `delta`, so that the host-wide totals keep them.
/// Returns how many were deleted.
fn delete_buckets(
    tx: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
    delta: &mut Delta,
) -> rusqlite::Result<i64> {
    let mut stmt = tx.prepare_cached(sql)?;
    let mut rows = stmt.query(args)?;
    let mut n = 0;
    while let Some(r) = rows.next()? {
        let count = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
        delta.counters.allowed += count(0)?;
        delta.counters.denied_rate += count(1)?;
        delta.counters.denied_inflight += count(2)?;
        n += 1;
    }
    delta.entries -= n;
    Ok(n)
}

/// Deletes every expired lease (an index range on `expires`), counting them.
fn expire_leases(tx: &Connection, now: i64, delta: &mut Delta) -> rusqlite::Result<()> {
    let expired = tx
        .prepare_cached("DELETE FROM leases WHERE expires <= ?1")?
        .execute([now])?;
    delta.counters.leases_expired += expired as u64;
    Ok(())
}

/// Makes room for one more bucket: drained buckets (full again) go first, then the least
/// recently used one; buckets holding a live lease never go. False when nothing could go.
fn make_room(tx: &Connection, now: i64, max: u64, delta: &mut Delta) -> rusqlite::Result<bool> {
    let stored: i64 = tx
        .prepare_cached("SELECT entries FROM stats WHERE id = 0")?
        .query_row([], |r| r.get(0))?;
    let mut entries = stored + delta.entries;
    if entries >= max as i64 {
        expire_leases(tx, now, delta)?;
    }
    while entries >= max as i64 {
        let drained = delete_buckets(
            tx,
            "DELETE FROM buckets WHERE key IN (SELECT o.key FROM
             (SELECT key, full_at FROM buckets ORDER BY used_at LIMIT ?3) AS o
             WHERE o.full_at <= ?1 AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = o.key) LIMIT ?2)
             RETURNING allowed, denied_rate, denied_inflight",
            params![now, DRAIN_BATCH, DRAIN_WINDOW],
            delta,
        )?;
        if drained > 0 {
            entries -= drained;
            continue;
        }
        let evicted = delete_buckets(
            tx,
            "DELETE FROM buckets WHERE key = (SELECT b.key FROM buckets b WHERE NOT EXISTS
             (SELECT 1 FROM leases l WHERE l.key = b.key) ORDER BY b.used_at LIMIT 1)
             RETURNING allowed, denied_rate, denied_inflight",
            [],
            delta,
        )?;
        if evicted == 0 {
            return Ok(false);
        }
        entries -= evicted;
        delta.counters.evicted += evicted as u64;
    }
    Ok(true)
}

fn new_lease_id() -> Result<LeaseId, StoreError> {
    let mut id = [0u8; 16];
    rand::rngs::SysRng
        .try_fill_bytes(&mut id)
        .map_err(|e| StoreError::Random(e.to_string()))?;
    Ok(LeaseId(id))
}

impl Store for SqliteStore {
    fn acquire(
        &mut self,
        key: &Pseudonym,
        ask: &Ask,
        lease_ttl_ms: u64,
        clock: Clock<'_>,
    ) -> Result<Acquired, StoreError> {
        // Drawn before the transaction, so that the write lock is held no longer than needed.
        let lease_id = if ask.max_inflight > 0 {
            Some(new_lease_id()?)
        } else {
            None
        };
        let result = self.write(clock, |tx, delta, max_entries, now| {
            let stored = read_bucket(tx, key)?;
            // Leases only matter to calls that take one (and to make_room, which expires them
            // itself): a plain rate check touches no lease page.
            let slots = if ask.max_inflight > 0 {
                expire_leases(tx, now, delta)?;
                let (live, earliest) = tx
                    .prepare_cached("SELECT count(*), min(expires) FROM leases WHERE key = ?1")?
                    .query_row([key], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?)))?;
                Slots { live: live as u64, earliest_expiry: earliest }
            } else {
                Slots::default()
            };
            if stored.is_none() {
                if !make_room(tx, now, max_entries, delta)? {
                    delta.counters.unavailable += 1;
                    return Ok(Acquired { verdict: Verdict::unavailable(false), lease: None });
                }
                delta.entries += 1;
            }
            let d = decision::decide(stored.map(|(b, _)| b), ask, slots, now);
            delta.counters.clock_regressions += u64::from(d.clock_regressed);
            // This decision's count, written into its bucket's row (see SCHEMA).
            let (allowed, denied_rate, denied_inflight) = match d.verdict.reason {
                Reason::Ok => (1, 0, 0),
                Reason::Rate => (0, 1, 0),
                Reason::Inflight => (0, 0, 1),
                Reason::Unavailable => unreachable!("decide() never answers unavailable"),
            };
            // Written on denials too: `used_at` keeps a hammered subject from looking idle.
            let (tokens, stamp, full_at) = (d.bucket.tokens as i64, d.bucket.stamp, d.bucket.full_at(&ask.policy));
            let used_at = used_at(now);
            match stored {
                Some((_, used)) if used == used_at => tx
                    .prepare_cached(
                        "UPDATE buckets SET tokens = ?2, stamp = ?3, full_at = ?4, allowed = allowed + ?5,
                         denied_rate = denied_rate + ?6, denied_inflight = denied_inflight + ?7 WHERE key = ?1",
                    )?
                    .execute(params![key, tokens, stamp, full_at, allowed, denied_rate, denied_inflight])?,
                _ => tx
                    .prepare_cached(
                        "INSERT INTO buckets (key, tokens, stamp, full_at, used_at, allowed, denied_rate, denied_inflight)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, stamp = excluded.stamp,
                         full_at = excluded.full_at, used_at = excluded.used_at,
                         allowed = allowed + excluded.allowed, denied_rate = denied_rate + excluded.denied_rate,
                         denied_inflight = denied_inflight + excluded.denied_inflight",
                    )?
                    .execute(params![key, tokens, stamp, full_at, used_at, allowed, denied_rate, denied_inflight])?,
            };
            let lease = match lease_id {
                Some(id) if d.verdict.allowed => {
                    tx.prepare_cached("INSERT INTO leases (id, key, expires) VALUES (?1, ?2, ?3)")?
                        .execute(params![id.0, key, lease::expiry(now, lease_ttl_ms)])?;
                    Some(id)
                }
                _ => None,
            };
            Ok(Acquired { verdict: d.verdict, lease })
        });
        if matches!(result, Err(StoreError::Busy)) {
            self.pending.unavailable += 1;
        }
        result
    }

    fn peek(
        &mut self,
        key: &Pseudonym,
        policy: &Policy,
        clock: Clock<'_>,
    ) -> Result<Verdict, StoreError> {
        self.arm();
        let now = clock();
        let stored = read_bucket(&self.conn, key).map_err(|e| self.classify(e))?;
        Ok(decision::peek(stored.map(|(b, _)| b), policy, now))
    }

    fn release(&mut self, leases: &[LeaseId], clock: Clock<'_>) -> Result<u64, StoreError> {
        self.write(clock, |tx, _, _, now| {
            let mut freed = 0;
            let mut delete =
                tx.prepare_cached("DELETE FROM leases WHERE id = ?1 AND expires > ?2")?;
            for id in leases {
                freed += delete.execute(params![id.0, now])? as u64;
            }
            Ok(freed)
        })
    }

    fn reset(&mut self, key: &Pseudonym) -> Result<bool, StoreError> {
        // Forgetting needs no time: the clock passed is never consulted.
        self.write(&|| 0, |tx, delta, _, _| {
            // Its counts stay in the host-wide totals: a reset forgets the limit, not history.
            let buckets = delete_buckets(
                tx,
                "DELETE FROM buckets WHERE key = ?1 RETURNING allowed, denied_rate, denied_inflight",
                [key],
                delta,
            )?;
            let leases = tx.prepare_cached("DELETE FROM leases WHERE key = ?1")?.execute([key])?;
            Ok(buckets > 0 || leases > 0)
        })
    }

    fn stats(&mut self, clock: Clock<'_>) -> Result<Stats, StoreError> {
        self.arm();
        let now = clock();
        let read = || -> rusqlite::Result<Stats> {
            let tx = self.conn.unchecked_transaction()?;
            let mut s = tx.query_row(
                "SELECT s.allowed + b.allowed, s.denied_rate + b.denied_rate,
                 s.denied_inflight + b.denied_inflight, s.unavailable, s.leases_expired, s.evicted,
                 s.clock_regressions, s.entries FROM stats s, (SELECT coalesce(sum(allowed), 0) AS allowed,
                 coalesce(sum(denied_rate), 0) AS denied_rate, coalesce(sum(denied_inflight), 0) AS denied_inflight
                 FROM buckets) b WHERE s.id = 0",
                [],
                |r| {
                    let n = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
                    Ok(Stats {
                        counters: Counters {
                            allowed: n(0)?, denied_rate: n(1)?, denied_inflight: n(2)?, unavailable: n(3)?,
                            leases_expired: n(4)?, evicted: n(5)?, clock_regressions: n(6)?,
                        },
                        entries: n(7)?,
                        live_leases: 0,
                    })
                },
            )?;
            s.live_leases = tx.query_row(
                "SELECT count(*) FROM leases WHERE expires > ?1",
                [now],
                |r| r.get::<_, i64>(0),
            )? as u64;
            tx.commit()?;
            Ok(s)
        };
        let mut s = read().map_err(|e| self.classify(e))?;
        s.counters.add(&self.pending);
        Ok(s)
    }
}
