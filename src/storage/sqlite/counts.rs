//! The counter bookkeeping, all of it: a decision's count goes into its bucket's row (so that
//! it writes one page); counts that belong to no bucket (unavailable, expired leases,
//! evictions, clock regressions, and those of deleted buckets) go into the one `stats` row;
//! the totals are the stats row plus the sums over the buckets.

use crate::core::counters::{Counters, Stats};
use crate::core::decision::Reason;
use rusqlite::{params, Connection};

/// What one transaction changes in the stats row.
#[derive(Default)]
pub struct Delta {
    pub counters: Counters,
    /// Rows added to (or, negative, removed from) `buckets`.
    pub entries: i64,
    /// Rows added to (or, negative, removed from) `requests`.
    pub requests: i64,
    /// A time at which a bucket written by this transaction may become drained, when that
    /// may be earlier than the stored drain floor (see evict.rs).
    pub drainable_at: Option<i64>,
}

impl Delta {
    pub fn drainable_at(&mut self, t: i64) {
        self.drainable_at = Some(self.drainable_at.map_or(t, |d| d.min(t)));
    }
}

/// A decision's count as the three per-bucket columns (allowed, denied_rate, denied_inflight).
pub fn bucket_columns(reason: Reason) -> (i64, i64, i64) {
    let mut c = Counters::default();
    c.record(reason);
    (
        c.allowed as i64,
        c.denied_rate as i64,
        c.denied_inflight as i64,
    )
}

/// Adds `delta` to the stats row; most decisions have nothing to add and write nothing here.
pub fn flush(tx: &Connection, delta: &Delta) -> rusqlite::Result<()> {
    let c = &delta.counters;
    if c.is_zero() && delta.entries == 0 && delta.requests == 0 {
        if let Some(t) = delta.drainable_at {
            // Writes the page only when this lowers the floor (a release, mostly).
            tx.prepare_cached(
                "UPDATE stats SET drain_floor = ?1 WHERE id = 0 AND drain_floor > ?1",
            )?
            .execute([t])?;
        }
        return Ok(());
    }
    tx.prepare_cached(
        "UPDATE stats SET allowed = allowed + ?1, denied_rate = denied_rate + ?2,
         denied_inflight = denied_inflight + ?3, unavailable = unavailable + ?4,
         leases_expired = leases_expired + ?5, evicted = evicted + ?6,
         clock_regressions = clock_regressions + ?7, keys_migrated = keys_migrated + ?8,
         reopened = reopened + ?9, storage_errors = storage_errors + ?10,
         dry_run_denied = dry_run_denied + ?13, retries = retries + ?14, requests = requests + ?15,
         entries = entries + ?11, drain_floor = min(drain_floor, ?12) WHERE id = 0",
    )?
    .execute(params![
        c.allowed as i64,
        c.denied_rate as i64,
        c.denied_inflight as i64,
        c.unavailable as i64,
        c.leases_expired as i64,
        c.evicted as i64,
        c.clock_regressions as i64,
        c.keys_migrated as i64,
        c.reopened as i64,
        c.storage_errors as i64,
        delta.entries,
        delta.drainable_at.unwrap_or(i64::MAX),
        c.dry_run_denied as i64,
        c.retries as i64,
        delta.requests
    ])?;
    Ok(())
}

/// Deletes the buckets `sql` selects (a `DELETE ... RETURNING` of the three per-bucket
/// counters) and folds their counts into `delta`, so that the totals keep them. Returns how
/// many were deleted.
pub fn delete_buckets(
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

/// The totals and gauges, read in one snapshot (a read transaction never blocks writers).
pub fn read(conn: &Connection, now: i64) -> rusqlite::Result<Stats> {
    let tx = conn.unchecked_transaction()?;
    let mut s = tx.query_row(
        "SELECT s.allowed + b.allowed, s.denied_rate + b.denied_rate,
         s.denied_inflight + b.denied_inflight, s.unavailable, s.leases_expired, s.evicted,
         s.clock_regressions, s.keys_migrated, s.reopened, s.storage_errors, s.entries, s.dry_run_denied, s.retries FROM stats s, (SELECT coalesce(sum(allowed), 0) AS allowed,
         coalesce(sum(denied_rate), 0) AS denied_rate, coalesce(sum(denied_inflight), 0) AS denied_inflight
         FROM buckets) b WHERE s.id = 0",
        [],
        |r| {
            let n = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            Ok(Stats {
                counters: Counters {
                    allowed: n(0)?,
                    denied_rate: n(1)?,
                    denied_inflight: n(2)?,
                    unavailable: n(3)?,
                    leases_expired: n(4)?,
                    evicted: n(5)?,
                    clock_regressions: n(6)?,
                    keys_migrated: n(7)?,
                    reopened: n(8)?,
                    storage_errors: n(9)?,
                    dry_run_denied: n(11)?,
                    retries: n(12)?,
                },
                entries: n(10)?,
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
}
