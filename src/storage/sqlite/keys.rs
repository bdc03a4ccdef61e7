//! The store's key record (which key its pseudonyms are made with), and, during a key
//! rotation, buckets moved from their previous pseudonym to the current one.

use super::buckets::{read_bucket, Stored};
use super::counts::Delta;
use super::SqliteStore;
use crate::core::keyswitch::{Fingerprint, KeyRecord, STAMP_NOW};
use crate::core::subject::BucketKey;
use crate::storage::{Counters, KeyRecords, StoreError};
use rusqlite::{params, Connection, OptionalExtension};

fn read_key_record(conn: &Connection) -> rusqlite::Result<Option<KeyRecord>> {
    conn.prepare_cached(
        "SELECT fingerprint, path, host, previous, since FROM keyring WHERE id = 0",
    )?
    .query_row([], |r| {
        Ok(KeyRecord {
            fingerprint: r.get(0)?,
            path: r.get(1)?,
            host: r.get(2)?,
            previous: r.get(3)?,
            since_ms: r.get(4)?,
        })
    })
    .optional()
}

/// During a key rotation: the bucket as it is stored under the previous key's pseudonym.
pub(super) fn read_previous(tx: &Connection, key: &BucketKey) -> rusqlite::Result<Option<Stored>> {
    match key.previous {
        Some(previous) => read_bucket(
            tx,
            &BucketKey {
                bucket: previous,
                ..*key
            },
        ),
        None => Ok(None),
    }
}

/// During a key rotation: moves a bucket missing under the current key from its previous
/// pseudonym (tokens, time stamp, counters, live leases), counted as `keys_migrated`.
pub(super) fn migrate(
    tx: &Connection,
    key: &BucketKey,
    delta: &mut Delta,
) -> rusqlite::Result<Option<Stored>> {
    let Some(previous) = key.previous else {
        return Ok(None);
    };
    let moved = tx
        .prepare_cached("UPDATE buckets SET key = ?2 WHERE key = ?1")?
        .execute([previous, key.bucket])?;
    if moved == 0 {
        return Ok(None);
    }
    tx.prepare_cached("UPDATE leases SET key = ?2 WHERE key = ?1")?
        .execute([previous, key.bucket])?;
    delta.counters.keys_migrated += 1;
    read_bucket(tx, key)
}

impl KeyRecords for SqliteStore {
    fn key_record(&mut self) -> Result<Option<KeyRecord>, StoreError> {
        self.read(|conn, _| read_key_record(conn))
    }

    fn record_key(
        &mut self,
        new: &KeyRecord,
        expected: Option<&Fingerprint>,
    ) -> Result<bool, StoreError> {
        self.write(&Counters::default(), |tx, _, now| {
            if read_key_record(tx)?.map(|r| r.fingerprint).as_ref() != expected {
                return Ok(false);
            }
            let since = match new.since_ms {
                STAMP_NOW => now,
                s => s,
            };
            tx.prepare_cached(
                "INSERT OR REPLACE INTO keyring (id, fingerprint, path, host, previous, since)
                 VALUES (0, ?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                new.fingerprint,
                new.path,
                new.host,
                new.previous,
                since
            ])?;
            Ok(true)
        })
    }
}
