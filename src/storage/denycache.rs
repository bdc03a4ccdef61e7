//! [`DenyCache`]: a `rate` denial repeated locally, without asking the store, until it is
//! over: a client hammering a bucket it has emptied costs the store one call per wait, not one
//! per request.
//!
//! After the store denies bucket B for tokens (`rate`) at policy P and cost C with a wait of R
//! ms, later calls for B with the same P and a cost of at least C are denied here until
//! `t_sent + R`, where `t_sent` is this wrapper's clock read *before* it called the store. That
//! makes it exact, never a denial the store would not have given: the store decided at some
//! `t_d >= t_sent`, when B needed R more ms of refill for C tokens, so it holds fewer than C
//! (and than any larger cost) until `t_d + R >= t_sent + R`. (Under P, tokens come back only
//! with time: a token bucket's refill, a window's end or slide. A reset or a refund of B
//! through this wrapper drops its entry, and so does a call for B with another policy, which
//! the store decides: B may then come back sooner. A reset or a refund made by another process
//! is seen through the store's [`RefillEpoch`]: SQLite's moves with every reset, refund and
//! eviction of the host, and the entries go; Redis does not track one, and B stays denied here
//! until the wait ends, as it was told. On either store, B stays denied here until then too when
//! another process used it with another policy meanwhile.)
//!
//! Not cached: `inflight` denials (a release may free a slot at any time), shadow scopes
//! (`dry_run`: their denials are answered allowed, and so must be counted by the store), calls
//! with a request id (their answer is remembered by the store), decisions not made by the
//! store itself (a fallback's). A local denial has source [`Source::DenyCache`], `remaining`
//! 0, the rest of R as `retry_after_ms`, and is counted as `denied_rate`: in the carried counts
//! (see [`Store`]), or, for a store whose totals are the sums of its buckets' counts
//! ([`Denials::InBuckets`]), in the bucket alone.

use super::{
    Acquired, AcquiredAll, Clock, Counters, Query, RefillEpoch, Reply, Store, StoreError, StoreExt,
};
use crate::core::bucket::Policy;
use crate::core::decision::{Ask, Reason, Source, Verdict};
use crate::core::lease::LeaseToken;
use crate::core::subject::{BucketKey, Pseudonym};
use std::collections::HashMap;

/// Most buckets remembered; when full, expired entries are dropped, and if none was, all.
pub const MAX_ENTRIES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Entry {
    policy: Policy,
    cost: u64,
    /// `t_sent + R`: denied here before it.
    until: i64,
    /// The store's answer at `t_sent`, for the fields a local denial repeats.
    verdict: Verdict,
    sent: i64,
}

/// Where the store counts a deny cache's denials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denials {
    /// In the shared totals (carried down as `denied_rate`), and in the buckets' own counts
    /// for the pressure view, sent at most once a second (Redis).
    InTotals,
    /// In the buckets' counts alone, which the store's totals are the sums of (SQLite): also
    /// carried down, each would count twice.
    InBuckets,
}

pub struct DenyCache {
    inner: Box<dyn Store>,
    clock: Clock,
    denials: Denials,
    entries: HashMap<Pseudonym, Entry>,
    /// Local denials per bucket, not yet added to the store's own counts (for the pressure
    /// view), and when they last were: at most once a second, at `top` and at the end.
    denied: HashMap<Pseudonym, (BucketKey, u64)>,
    denials_sent: i64,
    /// The inner store's [`RefillEpoch`] when the entries were made.
    epoch: RefillEpoch,
}

/// How often local denials are added to their buckets' counts in the store.
const DENIALS_EVERY_MS: i64 = 1_000;

impl DenyCache {
    /// `clock`: monotonic milliseconds (only differences are used).
    pub fn new(inner: Box<dyn Store>, clock: Clock, denials: Denials) -> Self {
        Self {
            inner,
            clock,
            denials,
            entries: HashMap::new(),
            denied: HashMap::new(),
            denials_sent: 0,
            epoch: RefillEpoch::Untracked,
        }
    }

    /// Whether the entries may be used now: the store's epoch is checked first, and entries
    /// made before a bucket got tokens back other than by refill (another process's reset, an
    /// eviction, a rebuilt file) are dropped. A store that cannot tell now gets no caching.
    fn usable(&mut self, carry: &mut Counters) -> bool {
        let now = self.inner.refill_epoch(carry);
        if now != self.epoch {
            self.entries.clear();
            self.epoch = now;
        }
        now != RefillEpoch::Unknown
    }

    /// Buckets remembered now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A call with a request id is never answered here: its answer depends on the record the
    /// store keeps for that id (a replay is allowed even from an empty bucket, a retry while the
    /// first admission runs is `in_progress`), which this cache does not see. Denials with a
    /// fresh id on every call stay cheap all the same: SQLite answers them from its read
    /// snapshot (record and bucket read together), without the write lock.
    ///
    /// A reservation is never answered here either: a wait this cache would deny may be one
    /// the store books.
    fn cacheable(ask: &Ask) -> bool {
        !ask.dry_run && ask.request.is_none() && ask.max_wait_ms.is_none()
    }

    /// The local denial for `ask` at `now`, if the remembered one covers it.
    fn lookup(&mut self, key: &BucketKey, ask: &Ask, now: i64) -> Option<Verdict> {
        let e = *self.entries.get(&key.bucket)?;
        if now >= e.until || now < e.sent {
            self.entries.remove(&key.bucket);
            return None;
        }
        if e.policy != ask.policy {
            // Decided by the store under another policy (another limit or period, a window),
            // the bucket may get its tokens back sooner than the remembered wait says.
            self.entries.remove(&key.bucket);
            return None;
        }
        if ask.cost < e.cost {
            return None;
        }
        let elapsed = (now - e.sent) as u64;
        Some(Verdict {
            allowed: false,
            reason: Reason::Rate,
            remaining: 0,
            retry_after_ms: (e.until - now) as u64,
            reset_after_ms: e.verdict.reset_after_ms.saturating_sub(elapsed),
            next_token_ms: e.verdict.next_token_ms.saturating_sub(elapsed),
            dry_run: false,
            replay: false,
            source: Source::DenyCache,
            wait_ms: 0,
            reserved: e.verdict.reserved,
        })
    }

    fn remember(&mut self, key: &BucketKey, ask: &Ask, v: &Verdict, sent: i64) {
        let store_rate_denial = !v.allowed
            && v.reason == Reason::Rate
            && !v.dry_run
            && v.source == Source::Store
            && v.retry_after_ms > 0;
        if !store_rate_denial {
            return;
        }
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&key.bucket) {
            let now = (self.clock)();
            self.entries.retain(|_, e| now < e.until && now >= e.sent);
            if self.entries.len() >= MAX_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(
            key.bucket,
            Entry {
                policy: ask.policy,
                cost: ask.cost,
                until: sent.saturating_add(v.retry_after_ms.min(i64::MAX as u64) as i64),
                verdict: *v,
                sent,
            },
        );
    }

    /// Counts a local denial of `key`'s bucket where the store wants it.
    fn count(&mut self, key: &BucketKey, carry: &mut Counters) {
        let bucket = BucketKey {
            previous: None,
            ..*key
        };
        match self.denials {
            // Counted there alone, at once (the store only notes them).
            Denials::InBuckets => {
                let _ = self.inner.add_denials(&[(bucket, 1)], carry);
            }
            Denials::InTotals => {
                carry.record(Reason::Rate);
                self.denied.entry(key.bucket).or_insert((bucket, 0)).1 += 1;
                if self.denied.len() >= MAX_ENTRIES {
                    self.send_denials(true, carry);
                    self.denied.clear();
                }
            }
        }
    }

    /// Adds the local denials to their buckets in the store, when due (`force`: now). Kept
    /// for the next try only when nothing of them was added (a breaker refused them); after any
    /// other failure some may have been, and they are dropped: counted at most once, as the
    /// counters' flush is. Best effort, like the view it feeds.
    fn send_denials(&mut self, force: bool, carry: &mut Counters) {
        let now = (self.clock)();
        if self.denied.is_empty() || (!force && now - self.denials_sent < DENIALS_EVERY_MS) {
            return;
        }
        self.denials_sent = now;
        let batch: Vec<(BucketKey, u64)> = self.denied.values().copied().collect();
        match self.inner.add_denials(&batch, carry) {
            Err(e) if super::failover::refused(&e) => {}
            _ => self.denied.clear(),
        }
    }
}

impl Store for DenyCache {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        let sent = (self.clock)();
        let cacheable = Self::cacheable(ask) && self.usable(carry);
        if cacheable {
            if let Some(verdict) = self.lookup(key, ask, sent) {
                self.count(key, carry);
                return Ok(Acquired {
                    verdict,
                    lease: None,
                });
            }
        }
        let a = self.inner.acquire(key, ask, lease_ttl_ms, carry)?;
        if cacheable {
            self.remember(key, ask, &a.verdict, sent);
        }
        Ok(a)
    }

    /// Passed through, never cached: a compound denial is about several buckets at once, and
    /// the tokens a compound admission takes can only prolong a remembered denial, never end it;
    /// a bucket it decides under another policy than the remembered one forgets its denial (as
    /// in `lookup`).
    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        for (key, ask) in keys.iter().zip(asks) {
            if self
                .entries
                .get(&key.bucket)
                .is_some_and(|e| e.policy != ask.policy)
            {
                self.entries.remove(&key.bucket);
            }
        }
        self.inner.acquire_all(keys, asks, lease_ttl_ms, carry)
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<Verdict, StoreError> {
        self.inner.peek(key, policy, carry)
    }

    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        self.inner.release(leases, carry)
    }

    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        self.entries.remove(&key.bucket);
        self.inner.reset(key, carry)
    }

    /// The local denials go to their buckets before the pressure view is read (now), at the
    /// end of a request (when due) and at the end of the process (now).
    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        match q {
            Query::Top(_) | Query::Flush => self.send_denials(true, carry),
            Query::Tick => self.send_denials(false, carry),
            // Tokens coming back end a cached denial of the bucket (before the call: also when
            // it fails, after which whether they came back is unknown).
            Query::Refund(key, _, _) => {
                self.entries.remove(&key.bucket);
            }
            _ => {}
        }
        self.inner.serve(q, carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::Request;
    use crate::storage::fake::{key, Fake, Manual, Serving};
    use crate::storage::ErrorKind;

    /// 1 token per second, bucket of 1.
    fn ask(cost: u64) -> Ask {
        Ask::new(Policy::new(2, 2_000).unwrap(), cost, 0)
    }

    struct T {
        time: Manual,
        store: Fake,
        cache: DenyCache,
        /// The limiter's counts not written yet.
        carry: Counters,
    }

    fn setup() -> T {
        let time = Manual::at(10_000);
        let store = Fake::new(time.clock());
        let cache = DenyCache::new(store.boxed(), time.clock(), Denials::InTotals);
        T {
            time,
            store,
            cache,
            carry: Counters::default(),
        }
    }

    fn acquire(t: &mut T, a: &Ask) -> Acquired {
        t.cache.acquire(&key(1), a, 60_000, &mut t.carry).unwrap()
    }

    /// `ratelimit_stats()`: the store's, with the counts not written yet.
    fn stats(t: &mut T) -> Counters {
        let mut s = (&mut t.cache as &mut dyn Store)
            .stats(&mut t.carry)
            .unwrap()
            .counters;
        s.add(&t.carry);
        s
    }

    /// Empties the bucket (2 tokens) and gets the store's denial: wait 1000 ms for 1 token.
    fn denied(t: &mut T) -> Acquired {
        acquire(t, &ask(1));
        acquire(t, &ask(1));
        let d = acquire(t, &ask(1));
        assert_eq!(
            (d.verdict.reason, d.verdict.source),
            (Reason::Rate, Source::Store)
        );
        assert_eq!(d.verdict.retry_after_ms, 1_000);
        d
    }

    #[test]
    fn a_moved_refill_epoch_drops_the_remembered_denials() {
        let mut t = setup();
        t.store.0.borrow_mut().epoch = Some(RefillEpoch::At(1, 0));
        denied(&mut t);
        assert_eq!(acquire(&mut t, &ask(1)).verdict.source, Source::DenyCache);
        // Another process reset the bucket: its epoch moved.
        t.store.0.borrow_mut().buckets.clear();
        t.store.0.borrow_mut().epoch = Some(RefillEpoch::At(1, 1));
        let a = acquire(&mut t, &ask(1));
        assert!(a.verdict.allowed, "{:?}", a.verdict);
        assert_eq!(a.verdict.source, Source::Store);
    }

    #[test]
    fn nothing_is_cached_while_the_epoch_is_unknown() {
        let mut t = setup();
        t.store.0.borrow_mut().epoch = Some(RefillEpoch::Unknown);
        denied(&mut t);
        let calls = t.store.calls();
        let d = acquire(&mut t, &ask(1));
        assert_eq!(d.verdict.source, Source::Store);
        assert_eq!(t.store.calls(), calls + 1);
        assert!(t.cache.is_empty());
    }

    /// The same bucket at 50 tokens per second: what 1 per second denied, it admits 100 ms on.
    fn faster() -> Ask {
        Ask::new(Policy::new(100, 2_000).unwrap(), 1, 0)
    }

    #[test]
    fn a_call_with_another_policy_drops_the_remembered_denial() {
        let mut t = setup();
        denied(&mut t);
        t.time.set(10_100);
        let a = acquire(&mut t, &faster());
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
        // The faster policy's earnings are the bucket's now: 1 per second admits again.
        t.time.set(10_200);
        let a = acquire(&mut t, &ask(1));
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
    }

    #[test]
    fn a_compound_call_with_another_policy_drops_the_remembered_denial() {
        let mut t = setup();
        denied(&mut t);
        t.time.set(10_100);
        let all = t
            .cache
            .acquire_all(&[key(1)], &[faster()], 60_000, &mut t.carry)
            .unwrap();
        assert!(all.verdict.allowed, "{:?}", all.verdict);
        t.time.set(10_200);
        let a = acquire(&mut t, &ask(1));
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
    }

    #[test]
    fn a_compound_denial_is_not_cached() {
        let mut t = setup();
        let all = |t: &mut T| {
            t.cache
                .acquire_all(&[key(1)], &[ask(2)], 60_000, &mut t.carry)
                .unwrap()
        };
        all(&mut t);
        assert_eq!(all(&mut t).verdict.source, Source::Store);
        let calls = t.store.calls();
        assert_eq!(all(&mut t).verdict.source, Source::Store);
        assert_eq!(t.store.calls(), calls + 1, "the store was asked again");
    }

    #[test]
    fn a_repeated_call_is_denied_locally_without_asking_the_store() {
        let mut t = setup();
        denied(&mut t);
        let calls = t.store.calls();
        t.time.set(10_400);
        let d = acquire(&mut t, &ask(1));
        assert_eq!(t.store.calls(), calls, "the store was not asked");
        let v = d.verdict;
        assert_eq!(
            (v.allowed, v.reason, v.source),
            (false, Reason::Rate, Source::DenyCache)
        );
        assert_eq!(
            (v.remaining, v.retry_after_ms),
            (0, 600),
            "what is left of the wait"
        );
        assert_eq!(d.lease, None);
    }

    #[test]
    fn the_local_denial_ends_exactly_at_t_sent_plus_the_wait() {
        let mut t = setup();
        denied(&mut t);
        t.time.set(10_999);
        assert_eq!(acquire(&mut t, &ask(1)).verdict.source, Source::DenyCache);
        t.time.set(11_000);
        let a = acquire(&mut t, &ask(1));
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
    }

    #[test]
    fn t_sent_is_read_before_the_store_is_called() {
        // A store that takes 300 ms to answer: its wait counts from when it decided, later
        // than t_sent, so the local denial ends early rather than late.
        let mut t = setup();
        acquire(&mut t, &ask(1));
        acquire(&mut t, &ask(1));
        struct Slow(Fake, Manual);
        impl Store for Slow {
            fn acquire(
                &mut self,
                k: &BucketKey,
                a: &Ask,
                l: u64,
                c: &mut Counters,
            ) -> Result<Acquired, StoreError> {
                self.1.set(10_300);
                self.0.acquire(k, a, l, c)
            }
            fn acquire_all(
                &mut self,
                k: &[BucketKey],
                a: &[Ask],
                l: u64,
                c: &mut Counters,
            ) -> Result<AcquiredAll, StoreError> {
                self.0.acquire_all(k, a, l, c)
            }
            fn peek(
                &mut self,
                k: &BucketKey,
                p: &Policy,
                c: &mut Counters,
            ) -> Result<Verdict, StoreError> {
                self.0.peek(k, p, c)
            }
            fn release(&mut self, l: &[LeaseToken], c: &mut Counters) -> Result<u64, StoreError> {
                self.0.release(l, c)
            }
            fn reset(&mut self, k: &BucketKey, c: &mut Counters) -> Result<bool, StoreError> {
                self.0.reset(k, c)
            }
            fn serve(&mut self, q: Query<'_>, c: &mut Counters) -> Result<Reply, StoreError> {
                self.0.serve(q, c)
            }
        }
        let mut cache = DenyCache::new(
            Box::new(Slow(
                t.store.clone(),
                Manual(std::sync::Arc::clone(&t.time.0)),
            )),
            t.time.clock(),
            Denials::InTotals,
        );
        let d = cache
            .acquire(&key(1), &ask(1), 60_000, &mut Counters::default())
            .unwrap();
        assert_eq!(d.verdict.retry_after_ms, 700, "the store decided at 10300");
        t.time.set(10_700);
        let a = cache
            .acquire(&key(1), &ask(1), 60_000, &mut Counters::default())
            .unwrap();
        assert_eq!(
            a.verdict.source,
            Source::Store,
            "10000 + 700: over, the store asked again"
        );
    }

    #[test]
    fn a_local_denial_is_counted_as_a_rate_denial_written_with_the_next_call() {
        let mut t = setup();
        denied(&mut t);
        acquire(&mut t, &ask(1));
        acquire(&mut t, &ask(1));
        assert_eq!(stats(&mut t).denied_rate, 3, "counted before written");
        assert_eq!(t.store.written().denied_rate, 1);
        t.time.set(11_000);
        acquire(&mut t, &ask(1));
        assert_eq!(t.store.written().denied_rate, 3, "written once");
        assert_eq!(stats(&mut t).denied_rate, 3);
    }

    #[test]
    fn carried_counts_stay_carried_when_the_next_call_fails() {
        let mut t = setup();
        denied(&mut t);
        acquire(&mut t, &ask(1));
        t.store.fail(Some(ErrorKind::Busy));
        assert!(t.cache.reset(&key(2), &mut t.carry).is_err());
        t.store.fail(None);
        t.cache.reset(&key(2), &mut t.carry).unwrap();
        assert_eq!(t.store.written().denied_rate, 2);
    }

    #[test]
    fn a_larger_cost_is_denied_locally_and_a_smaller_one_asks_the_store() {
        let mut t = setup();
        denied(&mut t);
        assert_eq!(acquire(&mut t, &ask(2)).verdict.source, Source::DenyCache);
        let calls = t.store.calls();
        let mut t2 = setup();
        acquire(&mut t2, &ask(1));
        let d = acquire(&mut t2, &ask(2)); // 1 token left, cost 2: denied, wait 1000
        assert_eq!(d.verdict.source, Source::Store);
        let a = acquire(&mut t2, &ask(1));
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
        assert_eq!(t.store.calls(), calls);
    }

    #[test]
    fn another_policy_asks_the_store() {
        let mut t = setup();
        denied(&mut t);
        let calls = t.store.calls();
        let other = Ask::new(Policy::new(3, 3_000).unwrap(), 1, 0);
        assert_eq!(acquire(&mut t, &other).verdict.source, Source::Store);
        assert_eq!(t.store.calls(), calls + 1);
    }

    #[test]
    fn another_bucket_asks_the_store() {
        let mut t = setup();
        denied(&mut t);
        let a = t
            .cache
            .acquire(&key(2), &ask(1), 60_000, &mut t.carry)
            .unwrap();
        assert_eq!((a.verdict.allowed, a.verdict.source), (true, Source::Store));
    }

    #[test]
    fn inflight_denials_are_not_cached() {
        let mut t = setup();
        let one_slot = Ask::new(Policy::new(5, 5_000).unwrap(), 1, 1);
        acquire(&mut t, &one_slot);
        assert_eq!(acquire(&mut t, &one_slot).verdict.reason, Reason::Inflight);
        let calls = t.store.calls();
        acquire(&mut t, &one_slot);
        assert_eq!(t.store.calls(), calls + 1);
        assert!(t.cache.is_empty());
    }

    fn shadow() -> Ask {
        let mut a = ask(1);
        a.dry_run = true;
        a
    }

    #[test]
    fn a_shadow_denial_is_not_remembered() {
        let mut t = setup();
        acquire(&mut t, &shadow());
        acquire(&mut t, &shadow());
        let d = acquire(&mut t, &shadow());
        assert!(d.verdict.dry_run && d.verdict.allowed);
        assert!(t.cache.is_empty());
    }

    #[test]
    fn a_shadow_call_is_not_answered_from_the_cache() {
        let mut t = setup();
        denied(&mut t);
        let calls = t.store.calls();
        let d = acquire(&mut t, &shadow());
        assert_eq!(
            t.store.calls(),
            calls + 1,
            "the store counts the shadow denial"
        );
        assert!(d.verdict.dry_run && d.verdict.allowed);
    }

    #[test]
    fn calls_with_a_request_id_always_ask_the_store() {
        let mut t = setup();
        denied(&mut t);
        let mut retry = ask(1);
        retry.request = Some(Request {
            name: [9; 16],
            ttl_ms: 60_000,
            terms: crate::core::request::Terms([1; 16]),
            replays: 3,
        });
        let calls = t.store.calls();
        assert_eq!(acquire(&mut t, &retry).verdict.source, Source::Store);
        assert_eq!(t.store.calls(), calls + 1);
    }

    #[test]
    fn a_reset_through_the_cache_drops_the_bucket_entry() {
        let mut t = setup();
        denied(&mut t);
        assert!(t.cache.reset(&key(1), &mut t.carry).unwrap());
        assert!(acquire(&mut t, &ask(1)).verdict.allowed);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut t = setup();
        let v = Verdict {
            retry_after_ms: 1_000,
            ..Verdict::unavailable(false)
        };
        let v = Verdict {
            reason: Reason::Rate,
            source: Source::Store,
            wait_ms: 0,
            reserved: 0,
            ..v
        };
        for i in 0..(MAX_ENTRIES as u32 + 10) {
            let mut k = key(0);
            k.bucket[..4].copy_from_slice(&i.to_le_bytes());
            t.cache.remember(&k, &ask(1), &v, 10_000);
            assert!(t.cache.len() <= MAX_ENTRIES);
        }
        // All live when it filled: cleared, then refilled with the last ones.
        assert_eq!(t.cache.len(), 10);
        t.time.set(11_000);
        let mut k = key(0);
        k.bucket[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        for i in 0..(MAX_ENTRIES - 10) as u32 {
            let mut k = key(0);
            k.bucket[4..8].copy_from_slice(&i.to_le_bytes());
            t.cache.remember(&k, &ask(1), &v, 10_500);
        }
        assert_eq!(t.cache.len(), MAX_ENTRIES);
        t.cache.remember(&k, &ask(1), &v, 10_500);
        assert_eq!(
            t.cache.len(),
            MAX_ENTRIES - 10 + 1,
            "the expired ten dropped first"
        );
    }

    /// What the store answers a batch of denials, and what it added.
    #[derive(Default)]
    struct Sink {
        answer: Option<ErrorKind>,
        added: u64,
    }

    /// A cache whose store's denials go to the returned sink, with one local denial held.
    fn with_a_local_denial() -> (T, std::rc::Rc<std::cell::RefCell<Sink>>) {
        let time = Manual::at(10_000);
        let store = Fake::new(time.clock());
        let sink = std::rc::Rc::new(std::cell::RefCell::new(Sink::default()));
        let to = std::rc::Rc::clone(&sink);
        // The fake store, its denials going to the sink.
        let inner = Box::new(Serving(
            store.boxed(),
            Box::new(move |q, inner, c| {
                let Query::AddDenials(d) = q else {
                    return inner.serve(q, c);
                };
                let mut sink = to.borrow_mut();
                match sink.answer {
                    // A breaker's refusal: nothing added.
                    Some(ErrorKind::Unreachable) => Err(StoreError::new(
                        ErrorKind::Unreachable,
                        crate::storage::failover::OPEN,
                    )),
                    // Some may have been added, as a timeout leaves it unknown.
                    Some(kind) => {
                        sink.added += d.iter().map(|(_, n)| n).sum::<u64>();
                        Err(StoreError::new(kind, "no answer in time"))
                    }
                    None => {
                        sink.added += d.iter().map(|(_, n)| n).sum::<u64>();
                        Ok(Reply::Done)
                    }
                }
            }),
        ));
        let mut t = T {
            cache: DenyCache::new(inner, time.clock(), Denials::InTotals),
            time,
            store,
            carry: Counters::default(),
        };
        denied(&mut t);
        assert_eq!(acquire(&mut t, &ask(1)).verdict.source, Source::DenyCache);
        (t, sink)
    }

    fn send(t: &mut T) {
        let _ = (&mut t.cache as &mut dyn Store).flush(&mut t.carry);
    }

    #[test]
    fn denials_a_breaker_refused_are_kept_and_sent_again() {
        let (mut t, sink) = with_a_local_denial();
        sink.borrow_mut().answer = Some(ErrorKind::Unreachable);
        send(&mut t);
        assert_eq!(sink.borrow().added, 0);
        sink.borrow_mut().answer = None;
        send(&mut t);
        assert_eq!(sink.borrow().added, 1);
        send(&mut t);
        assert_eq!(sink.borrow().added, 1, "once");
    }

    /// After a failure that may have added some, the denials are dropped: never counted twice.
    #[test]
    fn denials_whose_sending_failed_otherwise_are_dropped_not_sent_twice() {
        let (mut t, sink) = with_a_local_denial();
        sink.borrow_mut().answer = Some(ErrorKind::Timeout);
        send(&mut t);
        assert_eq!(sink.borrow().added, 1);
        sink.borrow_mut().answer = None;
        send(&mut t);
        assert_eq!(sink.borrow().added, 1, "not sent again");
    }
}
