//! A bucket's row, whatever its policy: read and written here only, so that each decision path
//! (`acquire`, `acquire_all`) makes one call for each, and the policy's state (the columns
//! `tokens`, `stamp`, `prev`, `policy`: see `core::bucket::Bucket`) is laid out in one place.

use super::counts::{self, Delta};
use super::evict;
use crate::core::bucket::{Bucket, Kind, Policy};
use crate::core::decision::Reason;
use crate::core::subject::BucketKey;
use rusqlite::{params, Connection, OptionalExtension};

/// A stored bucket, and when it was last used and is full again.
pub(super) struct Stored {
    pub bucket: Bucket,
    pub used_at: i64,
    pub full_at: i64,
}

pub(super) fn read_bucket(tx: &Connection, key: &BucketKey) -> rusqlite::Result<Option<Stored>> {
    tx.prepare_cached(
        "SELECT tokens, stamp, used_at, full_at, policy, prev FROM buckets WHERE key = ?1",
    )?
    .query_row([key.bucket], |r| {
        let n = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
        let bucket = match Kind::from_code(r.get(4)?) {
            Some(kind) => Bucket {
                tokens: n(0)?,
                stamp: r.get(1)?,
                prev: n(5)?,
                kind,
            },
            // A policy this build does not know (a damaged row): never read as a full bucket,
            // an empty one at its stamp, which refills as the call's policy allows.
            None => Bucket::tokens_at(0, r.get(1)?),
        };
        Ok(Stored {
            bucket,
            used_at: r.get(2)?,
            full_at: r.get(3)?,
        })
    })
    .optional()
}

/// Writes a decided bucket with the decision's count (`counted`: the reason, for the call's
/// reported bucket), its `full_at` and its recency. An upsert: eviction in the same
/// transaction may have dropped a row that was read (a compound call making room for another
/// of its buckets); the row then comes back as a new one.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_bucket(
    tx: &Connection,
    key: &BucketKey,
    stored: Option<&Stored>,
    bucket: &Bucket,
    policy: &Policy,
    counted: Option<Reason>,
    now: i64,
    delta: &mut Delta,
) -> rusqlite::Result<()> {
    let (allowed, denied_rate, denied_inflight) = counted.map_or((0, 0, 0), counts::bucket_columns);
    let (tokens, stamp, prev, kind) = (
        bucket.tokens.min(i64::MAX as u64) as i64,
        bucket.stamp,
        bucket.prev.min(i64::MAX as u64) as i64,
        bucket.kind.code(),
    );
    let full_at = bucket.full_at(policy);
    let used_at = evict::used_at(now);
    // A new bucket, or one full earlier than before (a changed policy), may undercut the drain
    // floor (see evict.rs).
    if stored.is_none_or(|s| full_at < s.full_at) {
        delta.drainable_at(full_at);
    }
    // A row read before is updated (with its recency only when that changed, so that the
    // used_at index is not touched on every call); one not there is inserted.
    let updated = match stored {
        None => 0,
        Some(s) if s.used_at == used_at => tx
            .prepare_cached(
                "UPDATE buckets SET tokens = ?2, stamp = ?3, full_at = ?4, allowed = allowed + ?5,
                 denied_rate = denied_rate + ?6, denied_inflight = denied_inflight + ?7,
                 prev = ?8, policy = ?9 WHERE key = ?1",
            )?
            .execute(params![
                key.bucket,
                tokens,
                stamp,
                full_at,
                allowed,
                denied_rate,
                denied_inflight,
                prev,
                kind
            ])?,
        Some(_) => tx
            .prepare_cached(
                "UPDATE buckets SET tokens = ?2, stamp = ?3, full_at = ?4, allowed = allowed + ?5,
                 denied_rate = denied_rate + ?6, denied_inflight = denied_inflight + ?7,
                 prev = ?8, policy = ?9, used_at = ?10 WHERE key = ?1",
            )?
            .execute(params![
                key.bucket,
                tokens,
                stamp,
                full_at,
                allowed,
                denied_rate,
                denied_inflight,
                prev,
                kind,
                used_at
            ])?,
    };
    if updated > 0 {
        return Ok(());
    }
    if stored.is_some() {
        // Dropped by make_room for another of this call's buckets: it comes back as a new row.
        delta.entries += 1;
    }
    tx.prepare_cached(
        "INSERT INTO buckets (key, tokens, stamp, full_at, used_at, allowed, denied_rate,
         denied_inflight, prev, policy) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        key.bucket,
        tokens,
        stamp,
        full_at,
        used_at,
        allowed,
        denied_rate,
        denied_inflight,
        prev,
        kind
    ])?;
    Ok(())
}
