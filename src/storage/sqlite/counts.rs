//! The counter bookkeeping, all of it: a decision's count goes into its bucket's row (so that
//! it writes one page); counts that belong to no bucket (unavailable, expired leases,
//! evictions, clock regressions, and those of deleted buckets) go into the one `stats` row;
//! the totals are the stats row plus the sums over the buckets. Denials decided from read
//! snapshots are held back per bucket ([`Touch`]) and written into their bucket's row by the
//! process's next write, or into the stats row when the row has gone since: each once.

use crate::core::counters::{Counters, Stats};
use crate::core::decision::Reason;
use crate::core::subject::Pseudonym;
use crate::core::top::{self, BucketView};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;

/// What a process holds back for one bucket it denied from snapshots.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    /// The recency to give the bucket (0: none newer than stored).
    pub used_at: i64,
    pub denied_rate: u64,
    pub denied_inflight: u64,
}

impl Touch {
    /// Counts one denial under its reason.
    pub fn count(&mut self, reason: Reason) {
        let (_, rate, inflight) = bucket_columns(reason);
        self.denied_rate += rate as u64;
        self.denied_inflight += inflight as u64;
    }

    pub fn counters(&self) -> Counters {
        Counters {
            denied_rate: self.denied_rate,
            denied_inflight: self.denied_inflight,
            ..Counters::default()
        }
    }
}

/// Writes a held-back [`Touch`] into its bucket's row; when the row is gone (reset, evicted or
/// dropped by another process since), its denials go into the stats row through `delta`.
pub fn write_touch(
    tx: &Connection,
    bucket: &Pseudonym,
    t: &Touch,
    delta: &mut Delta,
) -> rusqlite::Result<()> {
    // `used_at` is set only when this process has a newer one (0: none).
    let (rate, inflight) = (t.denied_rate as i64, t.denied_inflight as i64);
    let updated = if t.used_at > 0 {
        tx.prepare_cached(
            "UPDATE buckets SET used_at = max(used_at, ?2), denied_rate = denied_rate + ?3,
             denied_inflight = denied_inflight + ?4 WHERE key = ?1",
        )?
        .execute(params![bucket, t.used_at, rate, inflight])?
    } else {
        tx.prepare_cached(
            "UPDATE buckets SET denied_rate = denied_rate + ?2,
             denied_inflight = denied_inflight + ?3 WHERE key = ?1",
        )?
        .execute(params![bucket, rate, inflight])?
    };
    if updated == 0 {
        delta.counters.add(&t.counters());
    }
    Ok(())
}

const VIEW_COLUMNS: &str =
    "b.key, b.tokens, b.stamp, b.full_at, b.used_at, b.allowed, b.denied_rate,
    b.denied_inflight, (SELECT count(*) FROM leases l WHERE l.key = b.key AND l.expires > ?1)";

fn view(r: &rusqlite::Row<'_>) -> rusqlite::Result<BucketView> {
    let n = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
    Ok(BucketView {
        bucket: r.get(0)?,
        tokens_milli: n(1)?,
        stamp_ms: r.get(2)?,
        full_at_ms: r.get(3)?,
        used_at_ms: r.get(4)?,
        allowed: n(5)?,
        denied_rate: n(6)?,
        denied_inflight: n(7)?,
        live_leases: n(8)?,
    })
}

/// The pressure view, read in one snapshot (never blocking a writer): the `n` buckets with
/// the most denials, with the denials `held` back by this process added. Exact for what is
/// written: a bucket outside the stored top `n` and not held back is beaten by `n` others.
pub fn top(
    conn: &Connection,
    now: i64,
    n: usize,
    held: &HashMap<Pseudonym, Touch>,
) -> rusqlite::Result<Vec<BucketView>> {
    let tx = conn.unchecked_transaction()?;
    let mut views: Vec<BucketView> = tx
        .prepare_cached(&format!(
            "SELECT {VIEW_COLUMNS} FROM buckets b WHERE b.denied_rate + b.denied_inflight > 0
             ORDER BY b.denied_rate + b.denied_inflight DESC, b.used_at DESC, b.key LIMIT ?2"
        ))?
        .query_map(params![now, n as i64], view)?
        .collect::<rusqlite::Result<_>>()?;
    for (bucket, t) in held {
        let i = match views.iter().position(|v| &v.bucket == bucket) {
            Some(i) => i,
            None => {
                let found = tx
                    .prepare_cached(&format!(
                        "SELECT {VIEW_COLUMNS} FROM buckets b WHERE b.key = ?2"
                    ))?
                    .query_row(params![now, bucket], view)
                    .optional()?;
                let Some(v) = found else { continue };
                views.push(v);
                views.len() - 1
            }
        };
        let v = &mut views[i];
        v.denied_rate += t.denied_rate;
        v.denied_inflight += t.denied_inflight;
        v.used_at_ms = v.used_at_ms.max(t.used_at);
    }
    tx.commit()?;
    views.retain(|v| v.denials() > 0);
    top::order(&mut views);
    views.truncate(n);
    Ok(views)
}

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
    /// A bucket was deleted other than for being drained (a reset): tokens came back.
    pub refilled: bool,
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
         redis_errors = redis_errors + ?16, fallback_switches = fallback_switches + ?17,
         fallback_decisions = fallback_decisions + ?18, denied_in_progress = denied_in_progress + ?19,
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
        delta.requests,
        c.redis_errors as i64,
        c.fallback_switches as i64,
        c.fallback_decisions as i64,
        c.denied_in_progress as i64
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
         s.clock_regressions, s.keys_migrated, s.reopened, s.storage_errors, s.entries, s.dry_run_denied, s.retries,
         s.redis_errors, s.fallback_switches, s.fallback_decisions, s.denied_in_progress FROM stats s, (SELECT coalesce(sum(allowed), 0) AS allowed,
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
                    denied_in_progress: n(16)?,
                    unavailable: n(3)?,
                    leases_expired: n(4)?,
                    evicted: n(5)?,
                    clock_regressions: n(6)?,
                    keys_migrated: n(7)?,
                    reopened: n(8)?,
                    storage_errors: n(9)?,
                    dry_run_denied: n(11)?,
                    retries: n(12)?,
                    redis_errors: n(13)?,
                    fallback_switches: n(14)?,
                    fallback_decisions: n(15)?,
                },
                entries: n(10)?,
                live_leases: 0,
                breaker: None,
                partial: false,
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
