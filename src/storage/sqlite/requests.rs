//! Admissions remembered for their request id (`$request_id`), judged by the core's
//! [`request::judge`]: a retry with the same terms is `in_progress` while the first
//! admission's lease lives, then replayed (nothing taken, no lease) while replays are left;
//! anything else is decided as a plain call. Kept out of `acquire` and `acquire_all`, which
//! call in here only for a call with a request id.
//!
//! A record is read with its bucket, in a read snapshot (so that a denial, or a retry in
//! progress, is answered without the write lock) or in the write transaction; only a replay
//! (which counts down the replays left) and an admission (which remembers it) write.

use super::buckets::read_bucket;
use super::counts::Delta;
use super::keys::read_previous;
use super::AcquiredAll;
use crate::core::bucket::Bucket;
use crate::core::compound;
use crate::core::decision::{self, Ask, Reason, Request, Verdict};
use crate::core::lease::LeaseToken;
use crate::core::request::{self, Judgement, Record, Terms};
use crate::core::subject::BucketKey;
use rusqlite::{params, Connection, OptionalExtension};

/// The record stored for `r`, judged for a call in `key`'s bucket at `now`. A read: in a
/// snapshot or in the write transaction.
pub fn judge(
    conn: &Connection,
    key: &BucketKey,
    r: &Request,
    now: i64,
) -> rusqlite::Result<Judgement> {
    let found = conn
        .prepare_cached(
            "SELECT r.bucket, r.terms, r.replays, r.expires, (SELECT l.expires FROM leases l
             WHERE l.id = r.lease AND l.key = r.bucket AND l.expires > ?2)
             FROM requests r WHERE r.key = ?1",
        )?
        .query_row(params![r.name, now], |row| {
            let record = Record {
                bucket: row.get(0)?,
                terms: Terms(row.get(1)?),
                replays_left: row.get::<_, i64>(2)?.clamp(0, i64::from(u32::MAX)) as u32,
                expires: row.get(3)?,
            };
            Ok((record, row.get::<_, Option<i64>>(4)?))
        })
        .optional()?;
    Ok(match found {
        None => Judgement::Fresh,
        Some((record, live)) => request::judge(Some(&record), &key.bucket, &r.terms, now, live),
    })
}

/// In the write transaction, before a call with a request id is decided: purges the expired
/// records (an index range), then judges the call. A replay takes one from the record's
/// replays left (the last one forgets it), counted as `retries`; in progress is counted as
/// `denied_in_progress`. The answer of either, the bucket as it stands (read, not written),
/// or None: decide the call as a plain one.
#[cold]
#[inline(never)]
pub fn answered(
    tx: &Connection,
    key: &BucketKey,
    ask: &Ask,
    r: &Request,
    now: i64,
    delta: &mut Delta,
) -> rusqlite::Result<Option<Verdict>> {
    let j = judge_for_write(tx, key, r, now, delta)?;
    if j == Judgement::Fresh {
        return Ok(None);
    }
    let stored = match read_bucket(tx, key)? {
        None => read_previous(tx, key)?,
        found => found,
    };
    let peeked = decision::peek(stored.map(|s| s.bucket), &ask.policy, now);
    let v = match j {
        Judgement::InProgress { until } => {
            decision::as_in_progress(peeked, until, now, ask.dry_run)
        }
        _ => decision::as_replay(peeked),
    };
    count(&v, delta);
    Ok(Some(v))
}

/// As [`answered`], for a compound call (`r` is its first limit's): each limit as it stands
/// (`stored`, read in the same transaction), nothing charged; the answer made by
/// `core::compound::remembered`.
#[cold]
#[inline(never)]
pub fn answered_all(
    tx: &Connection,
    keys: &[BucketKey],
    asks: &[Ask],
    r: &Request,
    stored: &[Option<Bucket>],
    now: i64,
    delta: &mut Delta,
) -> rusqlite::Result<Option<AcquiredAll>> {
    let j = judge_for_write(tx, &keys[0], r, now, delta)?;
    if j == Judgement::Fresh {
        return Ok(None);
    }
    let each: Vec<Verdict> = stored
        .iter()
        .zip(asks)
        .map(|(b, a)| decision::peek(*b, &a.policy, now))
        .collect();
    Ok(
        compound::remembered(&each, j, now, asks[0].dry_run).map(|(reported, verdict)| {
            count(&verdict, delta);
            AcquiredAll {
                verdict,
                each,
                reported,
                lease: None,
            }
        }),
    )
}

/// Purges the expired records, then judges `r` in the write transaction; a replay counts down
/// the record's replays left (the last one deletes it).
pub fn judge_for_write(
    tx: &Connection,
    key: &BucketKey,
    r: &Request,
    now: i64,
    delta: &mut Delta,
) -> rusqlite::Result<Judgement> {
    let purged = tx
        .prepare_cached("DELETE FROM requests WHERE expires <= ?1")?
        .execute([now])?;
    delta.requests -= purged as i64;
    let j = judge(tx, key, r, now)?;
    if j == Judgement::Replay {
        let left: i64 = tx
            .prepare_cached(
                "UPDATE requests SET replays = replays - 1 WHERE key = ?1 RETURNING replays",
            )?
            .query_row([r.name], |row| row.get(0))?;
        if left <= 0 {
            tx.prepare_cached("DELETE FROM requests WHERE key = ?1")?
                .execute([r.name])?;
            delta.requests -= 1;
        }
    }
    Ok(j)
}

/// Counts an answer given from a record: a replay as `retries`, in progress as
/// `denied_in_progress` (and `dry_run_denied` in a shadow scope). Into the totals, not the
/// bucket's row: neither is a decision of the bucket.
pub fn count(v: &Verdict, delta: &mut Delta) {
    if v.replay {
        delta.counters.retries += 1;
    } else if v.reason == Reason::InProgress {
        delta.counters.record_verdict(v);
    }
}

/// Remembers an admission made with `r` (replacing any record of its name), within
/// `max_entries` records (the ones nearest their end go first, never one whose lease is live:
/// see [`make_room`]).
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
/// Records whose lease is live are never dropped to make room: that would let a retry run
/// beside its first attempt (the red team dropped one by admitting other subjects). Looks at
/// the `over + ROOM_SCAN` records nearest their end (the `expires` index), drops up to `over`
/// of those without a live lease, and returns how many it dropped.
fn make_room(tx: &Connection, over: i64, now: i64, delta: &mut Delta) -> rusqlite::Result<i64> {
    const ROOM_SCAN: i64 = 64;
    let candidates: Vec<[u8; 16]> = tx
        .prepare_cached(
            "SELECT r.key FROM (SELECT key, lease FROM requests ORDER BY expires LIMIT ?1) r
             WHERE r.lease IS NULL OR NOT EXISTS
               (SELECT 1 FROM leases l WHERE l.id = r.lease AND l.expires > ?2)
             LIMIT ?3",
        )?
        .query_map(params![over + ROOM_SCAN, now, over], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut dropped = 0;
    for key in &candidates {
        dropped += tx
            .prepare_cached("DELETE FROM requests WHERE key = ?1")?
            .execute([key])? as i64;
    }
    delta.requests -= dropped;
    Ok(dropped)
}

pub fn remember(
    tx: &Connection,
    key: &BucketKey,
    r: &Request,
    lease: Option<&LeaseToken>,
    (now, lease_ttl_ms): (i64, u64),
    max_entries: u64,
    delta: &mut Delta,
) -> rusqlite::Result<()> {
    let replaced = tx
        .prepare_cached("DELETE FROM requests WHERE key = ?1")?
        .execute([r.name])?;
    delta.requests -= replaced as i64;
    if !request::worth_remembering(r.replays, lease.is_some()) {
        return Ok(());
    }
    let stored: i64 = tx
        .prepare_cached("SELECT requests FROM stats WHERE id = 0")?
        .query_row([], |row| row.get(0))?;
    let over = stored + delta.requests + 1 - max_entries.min(i64::MAX as u64) as i64;
    if over > 0 && make_room(tx, over, now, delta)? < over {
        // Every record near its end still has a live lease: dropping one would let a retry of
        // that request run beside it. This admission is not remembered instead (its retries
        // are charged like any call).
        return Ok(());
    }
    let expires = request::expiry(now, r.ttl_ms, lease.map(|_| lease_ttl_ms));
    tx.prepare_cached(
        "INSERT INTO requests (key, bucket, lease, terms, replays, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        r.name,
        key.bucket,
        lease.map(|l| l.id.0),
        r.terms.0,
        i64::from(r.replays),
        expires
    ])?;
    delta.requests += 1;
    Ok(())
}
