//! Keeping the table within `ratelimit.max_entries`: drained buckets (full again, with no live
//! lease, so holding no information) go first, wherever they are in the table; only when none
//! is left does the least recently used bucket without a live lease go (counted as evicted),
//! the least recently used of a sample when the table is larger than the sample.
//!
//! Without costing the hot path an index: neither on `full_at` nor on `used_at`. Drained
//! buckets are first looked for in a sample of [`SAMPLE`] buckets, then, when none is there, by
//! one scan of the table, which also finds the earliest time any bucket can become drained,
//! kept as the stats row's `drain_floor`. Until then no scan is needed: the least recently used
//! bucket of a sample can go. The writes that could make a bucket drained earlier than the
//! floor lower it in the same transaction: a new bucket (which writes the stats row anyway), a
//! bucket whose `full_at` moves earlier (a changed policy, rare), and a released lease (its
//! bucket may be full).
//!
//! Why a sample and no recency index (issue 24): with the index on `used_at`, every admission
//! on a bucket last used in another tenth of a second moved its index entry, two more pages
//! written and some four more read per commit (each worker reads them anew after another
//! worker's commit: SQLite resets a connection's page cache when the WAL changed), which
//! doubled the cost of an admission over 1,000 subjects against one subject (the probe in
//! probe.rs: 14-15 us and 7.4 pages read, against 7.8 us and 4 without the index). Buckets are
//! keyed by pseudonyms (HMAC outputs, spread evenly), so the [`SAMPLE`] keys that follow a
//! random one are a random sample: a table no larger than that is sampled whole (exact LRU),
//! and in a larger one the bucket evicted is older than all but about one in 65 of the table,
//! on average (the oldest of 64 drawn at random), as Redis's `allkeys-lru` approximates LRU
//! by sampling.

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
/// How many buckets a sample holds: those searched for drained ones, and among which the least
/// recently used is evicted. Bounds the search, which holds the write lock (a few leaf pages).
const SAMPLE: u32 = 64;

/// Recency is kept to a tenth of a second: LRU needs no more (`ratelimit_top()` shows it).
const RECENCY_MS: i64 = 100;

/// [`SAMPLE`] buckets from a random point of the key order on (wrapping around to the first
/// keys): `key`, `full_at` and `used_at` of each. Its parameters: `?S` the sample's size and
/// `?R` the random key it starts at (see [`sample_start`]).
const SAMPLED: &str = "SELECT key, full_at, used_at FROM (SELECT key, full_at, used_at FROM
     buckets WHERE key >= ?R ORDER BY key LIMIT ?S) UNION ALL SELECT key, full_at, used_at FROM
     (SELECT key, full_at, used_at FROM buckets WHERE key < ?R ORDER BY key LIMIT ?S) LIMIT ?S";

/// Where a sample starts: a random 16-byte key.
fn sample_start() -> Value {
    Value::Blob(rand::random::<[u8; 16]>().to_vec())
}

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
            &format!(
                "DELETE FROM buckets WHERE key IN (SELECT o.key FROM ({SAMPLED}) AS o
                 WHERE o.full_at <= ?1 AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = o.key)
                 AND o.key NOT IN (?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) LIMIT ?2)
                 RETURNING allowed, denied_rate, denied_inflight"
            )
            .replace("?S", "?3")
            .replace("?R", "?4"),
            params_from_iter(
                [now, DRAIN_BATCH.into(), SAMPLE.into()]
                    .map(Value::Integer)
                    .into_iter()
                    .chain([sample_start()])
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
        // The least recently used of a sample; the whole table only when every bucket of the
        // sample holds a live lease or is the call's own (a scan: rare).
        let mut evicted = delete_buckets(
            tx,
            &format!(
                "DELETE FROM buckets WHERE key = (SELECT o.key FROM ({SAMPLED}) AS o WHERE NOT
                 EXISTS (SELECT 1 FROM leases l WHERE l.key = o.key)
                 AND o.key NOT IN (?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ORDER BY o.used_at LIMIT 1)
                 RETURNING allowed, denied_rate, denied_inflight"
            )
            .replace("?S", "?1")
            .replace("?R", "?2"),
            params_from_iter(
                [Value::Integer(SAMPLE.into()), sample_start()]
                    .into_iter()
                    .chain(kept(keep)),
            ),
            delta,
        )?;
        if evicted == 0 {
            evicted = delete_buckets(
                tx,
                "DELETE FROM buckets WHERE key = (SELECT b.key FROM buckets b WHERE NOT EXISTS
                 (SELECT 1 FROM leases l WHERE l.key = b.key)
                 AND b.key NOT IN (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ORDER BY b.used_at LIMIT 1)
                 RETURNING allowed, denied_rate, denied_inflight",
                params_from_iter(kept(keep)),
                delta,
            )?;
        }
        if evicted == 0 {
            return Ok(false);
        }
        entries -= evicted;
        delta.counters.evicted += evicted as u64;
    }
    Ok(true)
}
