//! Keeping the table within `ratelimit.max_entries`: drained buckets (full again, with no live
//! lease, so holding no information) go first, wherever they are in the table; only when none
//! is left does the least recently used bucket without a live lease go (counted as evicted).
//!
//! Without costing the hot path an index on `full_at`: drained buckets are first looked for
//! among the least recently used (where idle ones are), then, when none is there, by one scan
//! of the table, which also finds the earliest time any bucket can become drained, kept as the
//! stats row's `drain_floor`. Until then no scan is needed: the least recently used bucket can
//! go. The writes that could make a bucket drained earlier than the floor lower it in the same
//! transaction: a new bucket (which writes the stats row anyway), a bucket whose `full_at`
//! moves earlier (a changed policy, rare), and a released lease (its bucket may be full).

use super::counts::{delete_buckets, Delta};
use crate::core::compound::MAX_LIMITS;
use crate::core::subject::Pseudonym;
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};

/// The buckets of the call making room, which none of its deletions may take (a compound
/// call's stored buckets would come back with its write, past `max_entries`): as many
/// parameters as a call has limits, the unused ones a key no bucket has (an empty blob), so
/// that each statement keeps one shape and stays prepared.
fn kept(keep: &[Pseudonym]) -> impl Iterator<Item = Value> + '_ {
    keep.iter()
        .map(|k| Value::Blob(k.to_vec()))
        .chain(std::iter::repeat(Value::Blob(Vec::new())))
        .take(MAX_LIMITS)
}

/// Drained buckets dropped at once when the table is full: amortises the clean-up.
const DRAIN_BATCH: u32 = 64;
/// Drained buckets dropped at once by a scan of the whole table.
const SCAN_BATCH: u32 = 4_096;
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

/// When the drain floor has passed (or is unknown): deletes drained buckets anywhere in the
/// table; when there are none, stores the new floor. Returns how many were deleted.
fn scan_for_drained(
    tx: &Connection,
    now: i64,
    keep: &[Pseudonym],
    delta: &mut Delta,
) -> rusqlite::Result<i64> {
    let floor: i64 = tx
        .prepare_cached("SELECT drain_floor FROM stats WHERE id = 0")?
        .query_row([], |r| r.get(0))?;
    if now < floor.min(delta.drainable_at.unwrap_or(i64::MAX)) {
        return Ok(0);
    }
    let deleted = delete_buckets(
        tx,
        "DELETE FROM buckets WHERE key IN (SELECT b.key FROM buckets b WHERE b.full_at <= ?1
         AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = b.key)
         AND b.key NOT IN (?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) LIMIT ?2)
         RETURNING allowed, denied_rate, denied_inflight",
        params_from_iter(
            [Value::Integer(now), Value::Integer(SCAN_BATCH.into())]
                .into_iter()
                .chain(kept(keep)),
        ),
        delta,
    )?;
    if deleted == 0 {
        // The earliest a bucket can be drained: when it is full again, or, for a full one
        // held by leases, when the first of them expires (an earlier release lowers the floor).
        let next: Option<i64> = tx
            .prepare_cached(
                "SELECT min(CASE WHEN b.full_at > ?1 THEN b.full_at
                 ELSE (SELECT min(l.expires) FROM leases l WHERE l.key = b.key) END) FROM buckets b",
            )?
            .query_row([now], |r| r.get(0))?;
        tx.prepare_cached("UPDATE stats SET drain_floor = ?1 WHERE id = 0")?
            .execute([next.unwrap_or(i64::MAX).max(now + 1)])?;
    }
    Ok(deleted)
}

/// Makes room for one more bucket, taking none of `keep` (the call's own). False when nothing
/// could go (every bucket holds a lease).
pub fn make_room(
    tx: &Connection,
    now: i64,
    max: u64,
    keep: &[Pseudonym],
    delta: &mut Delta,
) -> rusqlite::Result<bool> {
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
             WHERE o.full_at <= ?1 AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = o.key)
             AND o.key NOT IN (?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) LIMIT ?2)
             RETURNING allowed, denied_rate, denied_inflight",
            params_from_iter(
                [now, DRAIN_BATCH.into(), DRAIN_WINDOW.into()]
                    .map(Value::Integer)
                    .into_iter()
                    .chain(kept(keep)),
            ),
            delta,
        )?;
        if drained > 0 {
            entries -= drained;
            continue;
        }
        let scanned = scan_for_drained(tx, now, keep, delta)?;
        if scanned > 0 {
            entries -= scanned;
            continue;
        }
        let evicted = delete_buckets(
            tx,
            "DELETE FROM buckets WHERE key = (SELECT b.key FROM buckets b WHERE NOT EXISTS
             (SELECT 1 FROM leases l WHERE l.key = b.key)
             AND b.key NOT IN (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ORDER BY b.used_at LIMIT 1)
             RETURNING allowed, denied_rate, denied_inflight",
            params_from_iter(kept(keep)),
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
