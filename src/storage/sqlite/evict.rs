//! Keeping the table within `ratelimit.max_entries`: drained buckets (full again, so holding no
//! information) go first, then the least recently used one; a bucket with a live lease never.

use super::counts::{delete_buckets, Delta};
use rusqlite::{params, Connection};

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

/// The `used_at` a decision at `now` writes.
pub fn used_at(now: i64) -> i64 {
    now - now.rem_euclid(RECENCY_MS)
}

/// Deletes every expired lease (an index range on `expires`), counting them.
pub fn expire_leases(tx: &Connection, now: i64, delta: &mut Delta) -> rusqlite::Result<()> {
    let expired = tx
        .prepare_cached("DELETE FROM leases WHERE expires <= ?1")?
        .execute([now])?;
    delta.counters.leases_expired += expired as u64;
    Ok(())
}

/// Makes room for one more bucket. False when nothing could go (every bucket holds a lease).
pub fn make_room(tx: &Connection, now: i64, max: u64, delta: &mut Delta) -> rusqlite::Result<bool> {
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
