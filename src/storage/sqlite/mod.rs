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
mod schema;
mod tx;

use super::{Acquired, Clock, Counters, ErrorKind, Stats, Store, StoreError};
use crate::core::bucket::{Bucket, Policy};
use crate::core::decision::{self, Ask, Verdict};
use crate::core::lease::{self, LeaseId, LeaseToken, Slots};
use crate::core::subject::BucketKey;
use busy::Budget;
use counts::Delta;
use rand::TryRng;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tx::WriteTx;

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    max_entries: u64,
    budget: Budget,
    clock: Clock,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`. Call after fork, never before.
    pub fn open(
        path: &Path,
        busy_timeout_ms: u64,
        max_entries: u64,
        clock: Clock,
    ) -> Result<Self, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|source| {
            StoreError::new(
                ErrorKind::Misconfigured,
                format!("cannot open database {}", path.display()),
            )
            .with_source(source)
        })?;
        let mut store = Self {
            conn,
            path: path.to_owned(),
            max_entries,
            budget: Budget::new(Duration::from_millis(busy_timeout_ms)),
            clock,
        };
        store
            .conn
            .busy_handler(Some(store.budget.handler()))
            .map_err(|e| store.classify(e))?;
        // Every statement of the hot path stays prepared.
        store.conn.set_prepared_statement_cache_capacity(32);
        // Switching a new file to WAL and creating the schema can report busy without calling
        // the handler (e.g. while another process runs WAL recovery): retry until the deadline,
        // so that workers racing on a fresh file wait rather than answer "unavailable".
        loop {
            match schema::init(&store.conn).map_err(|e| store.classify(e)) {
                Err(e) if e.kind() == ErrorKind::Busy => match store.budget.time_left() {
                    Some(left) => std::thread::sleep(Duration::from_micros(500).min(left)),
                    None => return Err(e),
                },
                other => return other.map(|()| store),
            }
        }
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
            Some(ErrorCode::CannotOpen) => (
                ErrorKind::Misconfigured,
                format!("cannot open database {path}"),
            ),
            Some(ErrorCode::DiskFull) => (ErrorKind::Full, format!("database {path}")),
            _ => (ErrorKind::Io, format!("database {path}")),
        };
        StoreError::new(kind, what).with_source(source)
    }

    /// Runs `f` in one write transaction, with `now` read once the lock is held, and adds its
    /// counts (and the `unwritten` ones) to the stats row in the same transaction. A failure
    /// or a panic anywhere in it rolls everything back (see [`WriteTx`]).
    fn write<T>(
        &mut self,
        unwritten: &Counters,
        f: impl FnOnce(&Connection, &mut Delta, i64) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.budget.arm();
        let mut delta = Delta {
            counters: *unwritten,
            entries: 0,
        };
        let result = (|| {
            let tx = WriteTx::begin(&self.conn)?;
            let out = f(&self.conn, &mut delta, (self.clock)())?;
            counts::flush(&self.conn, &delta)?;
            tx.commit()?;
            Ok(out)
        })();
        result.map_err(|e| self.classify(e))
    }
}

/// A stored bucket and when it was last used.
fn read_bucket(tx: &Connection, key: &BucketKey) -> rusqlite::Result<Option<(Bucket, i64)>> {
    tx.prepare_cached("SELECT tokens, stamp, used_at FROM buckets WHERE key = ?1")?
        .query_row([key.bucket], |r| {
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

/// The bucket's live leases, once expired ones are gone.
fn live_slots(tx: &Connection, key: &BucketKey) -> rusqlite::Result<Slots> {
    let (live, earliest) = tx
        .prepare_cached("SELECT count(*), min(expires) FROM leases WHERE key = ?1")?
        .query_row([key.bucket], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
    Ok(Slots {
        live: live as u64,
        earliest_expiry: earliest,
    })
}

fn new_lease_id() -> Result<LeaseId, StoreError> {
    let mut id = [0u8; 16];
    rand::rngs::SysRng.try_fill_bytes(&mut id).map_err(|e| {
        StoreError::new(ErrorKind::Io, "no random bytes for a lease").with_source(e)
    })?;
    Ok(LeaseId(id))
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
        let lease_id = if ask.max_inflight > 0 {
            Some(new_lease_id()?)
        } else {
            None
        };
        let max_entries = self.max_entries;
        self.write(unwritten, |tx, delta, now| {
            let stored = read_bucket(tx, key)?;
            // Leases only matter to calls that take one (and to make_room, which expires them
            // itself): a plain rate check touches no lease page.
            let slots = if ask.max_inflight > 0 {
                evict::expire_leases(tx, now, delta)?;
                live_slots(tx, key)?
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
            let d = decision::decide(stored.map(|(b, _)| b), ask, slots, now);
            delta.counters.clock_regressions += u64::from(d.clock_regressed);
            // This decision's count goes into its bucket's row (see counts.rs). It is written on
            // denials too: `used_at` keeps a hammered subject from looking idle.
            let (allowed, denied_rate, denied_inflight) = counts::bucket_columns(d.verdict.reason);
            let (tokens, stamp, full_at) = (
                d.bucket.tokens as i64,
                d.bucket.stamp,
                d.bucket.full_at(&ask.policy),
            );
            let used_at = evict::used_at(now);
            match stored {
                Some((_, used)) if used == used_at => tx
                    .prepare_cached(
                        "UPDATE buckets SET tokens = ?2, stamp = ?3, full_at = ?4, allowed = allowed + ?5,
                         denied_rate = denied_rate + ?6, denied_inflight = denied_inflight + ?7 WHERE key = ?1",
                    )?
                    .execute(params![key.bucket, tokens, stamp, full_at, allowed, denied_rate, denied_inflight])?,
                _ => tx
                    .prepare_cached(
                        "INSERT INTO buckets (key, tokens, stamp, full_at, used_at, allowed, denied_rate, denied_inflight)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, stamp = excluded.stamp,
                         full_at = excluded.full_at, used_at = excluded.used_at,
                         allowed = allowed + excluded.allowed, denied_rate = denied_rate + excluded.denied_rate,
                         denied_inflight = denied_inflight + excluded.denied_inflight",
                    )?
                    .execute(params![key.bucket, tokens, stamp, full_at, used_at, allowed, denied_rate, denied_inflight])?,
            };
            let lease = match lease_id {
                Some(id) if d.verdict.allowed => {
                    tx.prepare_cached("INSERT INTO leases (id, key, expires) VALUES (?1, ?2, ?3)")?
                        .execute(params![id.0, key.bucket, lease::expiry(now, lease_ttl_ms)])?;
                    Some(LeaseToken { id, key: *key })
                }
                _ => None,
            };
            Ok(Acquired {
                verdict: d.verdict,
                lease,
            })
        })
    }

    fn peek(&mut self, key: &BucketKey, policy: &Policy) -> Result<Verdict, StoreError> {
        self.budget.arm();
        let now = (self.clock)();
        let stored = read_bucket(&self.conn, key).map_err(|e| self.classify(e))?;
        Ok(decision::peek(stored.map(|(b, _)| b), policy, now))
    }

    fn release(&mut self, leases: &[LeaseToken], unwritten: &Counters) -> Result<u64, StoreError> {
        self.write(unwritten, |tx, _, now| {
            let mut freed = 0;
            let mut delete = tx
                .prepare_cached("DELETE FROM leases WHERE id = ?1 AND key = ?2 AND expires > ?3")?;
            for t in leases {
                freed += delete.execute(params![t.id.0, t.key.bucket, now])? as u64;
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
            let leases = tx
                .prepare_cached("DELETE FROM leases WHERE key = ?1")?
                .execute([key.bucket])?;
            Ok(buckets > 0 || leases > 0)
        })
    }

    fn stats(&mut self) -> Result<Stats, StoreError> {
        self.budget.arm();
        let now = (self.clock)();
        counts::read(&self.conn, now).map_err(|e| self.classify(e))
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
        }
    }

    fn ask() -> Ask {
        Ask {
            policy: Policy::new(5, 60_000).unwrap(),
            cost: 1,
            max_inflight: 0,
        }
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
}
