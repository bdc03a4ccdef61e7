//! Denials decided from a read snapshot, without the write lock (an attack costs no write),
//! and which buckets this process last saw admitting (those go straight to the write lock).

use super::buckets::{live_slots_at, read_bucket};
use super::tx::ReadTx;
use super::{evict, requests, SqliteStore};
use crate::core::decision::{self, Ask, Reason};
use crate::core::lease::Slots;
use crate::core::request::Judgement;
use crate::core::subject::BucketKey;
use crate::storage::{Acquired, StoreError};

/// How many buckets a process remembers as admitting.
const ADMITTING_MAX: usize = 4_096;

impl SqliteStore {
    /// Remembers which buckets this process last saw admitting (a bounded set: a hint only,
    /// since the write transaction always decides again).
    pub(super) fn note_admitting(&mut self, key: &BucketKey, allowed: bool) {
        if allowed {
            if self.admitting.len() >= ADMITTING_MAX {
                self.admitting.clear();
            }
            self.admitting.insert(key.bucket);
        } else {
            self.admitting.remove(&key.bucket);
        }
    }

    /// A denial decided from a read snapshot, without the write lock: exact, because between
    /// the snapshot and now other writers can only have taken tokens (or slots), and time can
    /// only have added what the refill computes, so a denial then is a denial now. None when
    /// the snapshot allows (the write transaction decides again) or holds no bucket.
    ///
    /// A call with a request id reads its record in the same snapshot: judged a plain call,
    /// it is denied here as any other; in progress (the first admission's lease was live in
    /// the snapshot) it is answered here too; only a replay (which counts down the record's
    /// replays left) or an admission goes to the write transaction.
    pub(super) fn deny_from_snapshot(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
    ) -> Result<Option<Acquired>, StoreError> {
        let found = self.read(|conn, now| {
            // One statement is a snapshot by itself; slots and a record need more in the same.
            if ask.max_inflight == 0 && ask.request.is_none() {
                return Ok(
                    read_bucket(conn, key)?.map(|s| (s, Slots::default(), Judgement::Fresh, now))
                );
            }
            let tx = ReadTx::begin(conn)?;
            let Some(stored) = read_bucket(conn, key)? else {
                return Ok(None);
            };
            let slots = if ask.max_inflight > 0 {
                live_slots_at(conn, key, now)?
            } else {
                Slots::default()
            };
            let judged = match &ask.request {
                Some(r) => requests::judge(conn, key, r, now)?,
                None => Judgement::Fresh,
            };
            tx.end()?;
            Ok(Some((stored, slots, judged, now)))
        })?;
        let Some((stored, slots, judged, now)) = found else {
            return Ok(None);
        };
        let verdict = match judged {
            Judgement::Replay => return Ok(None),
            Judgement::InProgress { until } => {
                decision::in_progress(Some(stored.bucket), &ask.policy, until, now, ask.dry_run)
            }
            Judgement::Fresh => {
                let d = decision::decide(Some(stored.bucket), ask, slots, now);
                if d.verdict.took()
                    || decision::denial_writes(&stored.bucket, &d.bucket, &ask.policy)
                {
                    return Ok(None);
                }
                self.noted.clock_regressions += u64::from(d.clock_regressed);
                d.verdict
            }
        };
        self.note_admitting(key, false);
        // The reason goes into the bucket's row with the recency (see `touched`); what a
        // shadow scope answered instead, and a retry in progress, are totals only.
        self.noted.dry_run_denied += u64::from(verdict.dry_run);
        if verdict.reason == Reason::InProgress {
            self.noted.record(Reason::InProgress);
        }
        let used_at = evict::used_at(now);
        let touch = self.touched.entry(key.bucket).or_default();
        touch.count(verdict.reason);
        if used_at > stored.used_at {
            touch.used_at = touch.used_at.max(used_at);
        }
        Ok(Some(Acquired {
            verdict,
            lease: None,
        }))
    }
}
