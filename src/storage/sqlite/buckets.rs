//! A bucket's row and its leases, as every decision reads and writes them. The row is read
//! and written here only, so that the policy's state (the columns `tokens`, `stamp`, `prev`,
//! `policy`: see `core::bucket::Bucket`) is laid out in one place.

use super::counts::{self, Delta};
use super::evict;
use crate::core::bucket::{Bucket, Kind, Policy};
use crate::core::decision::Reason;
use crate::core::lease::{self, LeaseId, LeaseToken, Slots};
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

/// The bucket as stored under the current key, or moved from the previous one (a rotation).
pub(super) fn load(
    tx: &Connection,
    key: &BucketKey,
    delta: &mut Delta,
) -> rusqlite::Result<Option<Stored>> {
    match read_bucket(tx, key)? {
        None => super::keys::migrate(tx, key, delta),
        found => Ok(found),
    }
}

/// The slots in use in `key`'s bucket, for a call that takes one (expiring the host's leases
/// first); none for a plain rate check, which touches no lease page.
pub(super) fn slots(
    tx: &Connection,
    max_inflight: u64,
    key: &BucketKey,
    now: i64,
    delta: &mut Delta,
) -> rusqlite::Result<Slots> {
    if max_inflight == 0 {
        return Ok(Slots::default());
    }
    evict::expire_leases(tx, now, delta)?;
    live_slots_at(tx, key, now)
}

/// Makes room for the buckets of a call (`keys`) that are not stored yet, never by dropping
/// one of the call's own; false when the table is full of buckets that cannot be dropped (the
/// call is then "unavailable").
pub(super) fn room_for(
    tx: &Connection,
    keys: &[BucketKey],
    stored: &[Option<Stored>],
    now: i64,
    max_entries: u64,
    delta: &mut Delta,
) -> rusqlite::Result<bool> {
    let own: Vec<_> = keys.iter().map(|k| k.bucket).collect();
    for _ in stored.iter().filter(|s| s.is_none()) {
        if !evict::make_room(tx, now, max_entries, &own, delta)? {
            return Ok(false);
        }
        delta.entries += 1;
    }
    Ok(true)
}

/// Writes a bucket's new state, with the decision's count (`counted`) in its row (see
/// counts.rs: denials too, and `used_at`, so that a hammered subject never looks idle). A row
/// read before but gone since (dropped by `room_for` for another bucket of the same call)
/// comes back as a new one.
#[allow(clippy::too_many_arguments)]
pub(super) fn write(
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
    let updated = match stored {
        Some(_) => tx
            .prepare_cached(
                "UPDATE buckets SET tokens = ?2, stamp = ?3, full_at = ?4, used_at = ?5,
                 allowed = allowed + ?6, denied_rate = denied_rate + ?7,
                 denied_inflight = denied_inflight + ?8, prev = ?9, policy = ?10 WHERE key = ?1",
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
            ])?,
        None => 0,
    };
    if updated == 0 {
        if stored.is_some() {
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
    }
    Ok(())
}

/// Takes the slot `id` in `key`'s bucket for `lease_ttl_ms`; its token.
pub(super) fn take_slot(
    tx: &Connection,
    id: LeaseId,
    key: &BucketKey,
    now: i64,
    lease_ttl_ms: u64,
) -> rusqlite::Result<LeaseToken> {
    tx.prepare_cached("INSERT INTO leases (id, key, expires) VALUES (?1, ?2, ?3)")?
        .execute(params![id.0, key.bucket, lease::expiry(now, lease_ttl_ms)])?;
    Ok(LeaseToken {
        id,
        key: BucketKey {
            previous: None,
            ..*key
        },
    })
}

/// The bucket's leases still live at `now` (expired ones may not be deleted yet).
pub(super) fn live_slots_at(tx: &Connection, key: &BucketKey, now: i64) -> rusqlite::Result<Slots> {
    let (live, earliest) = tx
        .prepare_cached(
            "SELECT count(*), min(expires) FROM leases WHERE key = ?1 AND expires > ?2",
        )?
        .query_row(params![key.bucket, now], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
    Ok(Slots {
        live: live as u64,
        earliest_expiry: earliest,
    })
}
