//! The tables, and how a file gets them: created on first use, rebuilt when older.

use super::tx::WriteTx;
use rusqlite::Connection;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS buckets (
    key     BLOB PRIMARY KEY,   -- 16-byte pseudonym of (scope, subject)
    tokens  INTEGER NOT NULL,   -- milli-tokens held
    stamp   INTEGER NOT NULL,   -- ms up to which earnings are credited
    full_at INTEGER NOT NULL,   -- ms from which the bucket is full again (droppable)
    used_at INTEGER NOT NULL,   -- ms of the last decision, to RECENCY_MS, for LRU eviction (no
                                -- index: evict.rs samples)
    -- This bucket's share of the host-wide counters: kept in its own row so that a decision
    -- writes one page, folded into `stats` when the row is deleted (see counts.rs).
    allowed INTEGER NOT NULL DEFAULT 0,
    denied_rate INTEGER NOT NULL DEFAULT 0,
    denied_inflight INTEGER NOT NULL DEFAULT 0,
    -- Its policy (core::bucket::Kind::code: 0 token bucket, 1 fixed window, 2 sliding window)
    -- and, for a sliding window, the previous window's milli-tokens. For a window, `tokens`
    -- is what the current window used and `stamp` its start.
    policy INTEGER NOT NULL DEFAULT 0,
    prev INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
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
    keys_migrated INTEGER NOT NULL DEFAULT 0,
    reopened INTEGER NOT NULL DEFAULT 0,
    storage_errors INTEGER NOT NULL DEFAULT 0,
    dry_run_denied INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0,
    denied_in_progress INTEGER NOT NULL DEFAULT 0, -- not per bucket: see requests.rs
    -- The Redis backend's counters, written here when this file is its local fallback.
    redis_errors INTEGER NOT NULL DEFAULT 0,
    fallback_switches INTEGER NOT NULL DEFAULT 0,
    fallback_decisions INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0, -- rows in requests, kept in step like entries
    entries INTEGER NOT NULL DEFAULT 0,  -- rows in buckets, kept in step so no COUNT(*) is needed
    -- No bucket can be drained (full again, no live lease) before this time; 0: unknown.
    -- Found by a scan when the table is full, lowered by writes that could undercut it (evict.rs).
    drain_floor INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO stats (id) VALUES (0);
-- Admissions remembered for their request id (ratelimit_acquire's $request_id), judged by
-- core::request: a retry with the same terms is in progress while the lease lives, then
-- replayed at most `replays` more times (see requests.rs).
CREATE TABLE IF NOT EXISTS requests (
    key     BLOB PRIMARY KEY,   -- 16-byte pseudonym of (scope, subject, request id)
    bucket  BLOB NOT NULL,      -- the bucket it was charged to
    lease   BLOB,               -- the lease it took, if any
    terms   BLOB NOT NULL,      -- 16-byte digest of what the call asked for (core::request::Terms)
    replays INTEGER NOT NULL,   -- replays left
    expires INTEGER NOT NULL    -- ms: the admission's time + max(request_ttl, lease_ttl if a lease)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS requests_expires ON requests(expires);
-- Which key the pseudonyms are made with: its keyed fingerprint (never the key) and the key
-- file that recorded it (see core/keyswitch.rs).
CREATE TABLE IF NOT EXISTS keyring (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    fingerprint BLOB NOT NULL,
    path TEXT NOT NULL,
    host TEXT NOT NULL,      -- the host (its host name) that recorded it
    previous BLOB,           -- the fingerprint of the key it replaced on purpose, if any
    since INTEGER NOT NULL   -- ms: when this key was first recorded
);
";

/// Bumped whenever [`SCHEMA`] changes. An older file is emptied and rebuilt: it holds only
/// short-lived limits, which start afresh.
/// (7: the request records' terms and the key record's host, replaced key and time, which two
/// builds that never landed had each numbered 6. 8: the buckets' `policy` and `prev`, added to
/// a version 7 file in place: its buckets are token buckets, and keep their tokens.)
pub const SCHEMA_VERSION: i64 = 8;

/// Brings a version 7 file to 8 without emptying it.
const FROM_7: &str = "ALTER TABLE buckets ADD COLUMN policy INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE buckets ADD COLUMN prev INTEGER NOT NULL DEFAULT 0;";

const DROP_OLD_SCHEMA: &str =
    "DROP TABLE IF EXISTS buckets; DROP TABLE IF EXISTS leases; DROP TABLE IF EXISTS stats;
     DROP TABLE IF EXISTS requests; DROP TABLE IF EXISTS keyring;";

/// Whether a file's tables are this build's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    Ready,
    /// Made by a newer build (its version): never used, nor rebuilt, by this one. Its tables
    /// are not ours (every statement could fail on them), and a rebuild would reset the limits
    /// of the newer build's processes, which would rebuild it back.
    Newer(i64),
}

/// Sets the file up for this connection: small pages, WAL, `synchronous=NORMAL`, and the
/// tables when the file has none or older ones.
pub fn init(conn: &Connection) -> rusqlite::Result<Schema> {
    // Every commit appends whole pages to the WAL (a decision usually writes one: its
    // bucket's); small pages keep that append small. Takes effect only on a new, empty file.
    conn.execute_batch("PRAGMA page_size=1024")?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
    }
    conn.execute_batch("PRAGMA synchronous=NORMAL")?;
    // Only the first process ever needs the write lock here; the others just read.
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < SCHEMA_VERSION {
        let tx = WriteTx::begin(conn)?;
        // Read again under the lock: another worker may have just done this.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 7 {
            conn.execute_batch(FROM_7)?;
            conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
        } else if version < SCHEMA_VERSION {
            if version > 0 {
                conn.execute_batch(DROP_OLD_SCHEMA)?;
            }
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
        }
        tx.commit()?;
    } else if version > SCHEMA_VERSION {
        return Ok(Schema::Newer(version));
    }
    drop_recency_index(conn)?;
    Ok(Schema::Ready)
}

/// Files made before issue 24 have an index on `buckets(used_at)`, which every admission on a
/// bucket last used in another tenth of a second had to update (see evict.rs): dropped in
/// place, the buckets kept. Older builds still working on the file find their eviction
/// queries slower (a scan), never wrong; one that makes a file anew makes the index again,
/// and the next worker of this build drops it.
fn drop_recency_index(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'index' AND name = 'buckets_used_at'",
        [],
        |r| r.get(0),
    )?;
    if has {
        let tx = WriteTx::begin(conn)?;
        conn.execute_batch("DROP INDEX IF EXISTS buckets_used_at")?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_7_file_gains_the_policy_columns_and_keeps_its_buckets() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(init(&conn).unwrap(), Schema::Ready);
        // What version 7 had: the same buckets without policy and prev.
        conn.execute_batch(
            "ALTER TABLE buckets DROP COLUMN policy; ALTER TABLE buckets DROP COLUMN prev;
             INSERT INTO buckets (key, tokens, stamp, full_at, used_at) VALUES (x'01', 1500, 7, 9, 7);
             PRAGMA user_version = 7;",
        )
        .unwrap();
        assert_eq!(init(&conn).unwrap(), Schema::Ready);
        let row: (i64, i64, i64) = conn
            .query_row("SELECT tokens, policy, prev FROM buckets", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(row, (1500, 0, 0), "a token bucket, its tokens kept");
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }

    #[test]
    fn a_file_with_the_recency_index_loses_it_and_keeps_its_buckets() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(init(&conn).unwrap(), Schema::Ready);
        conn.execute_batch(
            "CREATE INDEX buckets_used_at ON buckets(used_at);
             INSERT INTO buckets (key, tokens, stamp, full_at, used_at) VALUES (x'01', 1500, 7, 9, 7);",
        )
        .unwrap();
        assert_eq!(init(&conn).unwrap(), Schema::Ready);
        let indexes: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'buckets_used_at'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let tokens: i64 = conn
            .query_row("SELECT tokens FROM buckets", [], |r| r.get(0))
            .unwrap();
        assert_eq!((indexes, tokens), (0, 1500));
    }
}
