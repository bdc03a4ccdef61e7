//! [`Failover`]: a primary store (Redis) behind the host's breakers, and the host's local
//! store (its SQLite file) deciding while the primary cannot; one layer, so that how a failed
//! call is answered is said in one place ([`Failover::either`]).
//!
//! **The breakers, one per server.** A call first reads the gate of the server it goes to
//! ([`HostBreaker::gate`], one atomic load; the server as the primary knows it,
//! [`crate::storage::Nodes`]: a cluster's master, or one for a single server): closed, it goes
//! to the primary; open, it fails at once with an `Unreachable` error ([`OPEN`]), so that an
//! outage costs each call nothing instead of a timeout. Each server's breaker is a file of the
//! host's (`<db_path>.breaker`, and `<db_path>.breaker-<hash of the address>` for each cluster
//! master), shared by the host's workers: a sick master stops only its own subjects, the
//! others keep deciding. Past the gate, the rules ([`crate::core::breaker`]) decide under the
//! file's lock whether this call is the host's one probe: only a decision may be ([`Call`]);
//! any other call is refused, open or half-open. Every failed call to the primary is counted as
//! `redis_errors`; only outages ([`ErrorKind::is_outage`]: no answer in time, no connection)
//! are fed to the rules: a server that answered, even with an error, is up, and a probe that
//! met it closes the breaker. A fault of a breaker file itself never stops a decision: the call
//! then goes to the primary as if closed.
//!
//! **The local fallback** (`ratelimit.redis_fallback=local`). A fault answered "unavailable"
//! ([`ErrorKind::answer`]; an open breaker's is one) is decided instead by the local store,
//! opened only when first needed: the verdict's source is [`Source::Fallback`], counted
//! `fallback_decisions` in that store's same step. The limit becomes per host during the outage,
//! never per worker. What an operator must fix stays the call's error. An opening of a breaker
//! (made by exactly one process of the host, under the file's lock) is a switch of the host's:
//! counted `fallback_switches` and logged once. Without a local store, the primary's fault is
//! the call's, and the limiter answers "unavailable".
//!
//! Counts go down in the one `carry` (see [`Store`]): a failed call adds its `redis_errors`
//! there, and whichever store next succeeds writes them. `ratelimit_stats()` sums both stores
//! (with the primary down: partial, the local ones) and reports the worst breaker's state.

use super::hostbreaker::HostBreaker;
use super::{
    Acquired, AcquiredAll, Answer, Clock, Counters, ErrorKind, Query, RefillEpoch, Reply, Stats,
    Store, StoreError, StoreExt,
};
use crate::core::breaker::{Admit, BreakerState};
use crate::core::bucket::Policy;
use crate::core::config::BreakerConfig;
use crate::core::decision::{Ask, Source, Verdict};
use crate::core::lease::LeaseToken;
use crate::core::subject::BucketKey;
use crate::opslog::{Event, OpsLog};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The error of a call the open breaker refused (names no subject, nor the primary's address).
pub const OPEN: &str = "primary store breaker open (redis not asked)";

/// Whether `e` is a breaker's refusal ([`OPEN`]): the primary was not asked, so nothing of
/// the call was done (a batch of denials refused so may be sent again, never counted twice).
pub fn refused(e: &StoreError) -> bool {
    e.kind() == ErrorKind::Unreachable && e.what() == OPEN
}

/// Opens the local store; called on the first need (never at startup), again after a failure.
pub type LocalStore = Box<dyn FnMut() -> Result<Box<dyn Store>, StoreError>>;

/// Whether a call may be a half-open breaker's probe, whose success closes the breaker. The
/// probe must prove that what the breaker protects works: the decisions a request waits on.
/// A cheaper call (a counters flush, the key record, stats) may succeed on a server where the
/// decision command hangs, and would send every worker back to waiting for its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// acquire, acquire_all and peek: each runs the limiter's own command (`RL.ACQUIRE`,
    /// `RL.ACQUIRE_ALL`, `RL.PEEK`, or its script) on the bucket's server, and a request waits
    /// for its verdict. Peek is one too, so that a site that only peeks can close its breaker.
    Decision,
    /// Everything else (release, reset, refund, denials, counts, stats, top, the key record):
    /// passes while closed; while open or half-open it is refused at once, never the probe.
    Other,
}

/// The most servers whose breakers one process keeps open (a cluster's masters).
const MAX_NODES: usize = 64;

/// The host's breakers in front of the primary's servers.
struct Breakers {
    /// The file of a server not told apart (a single server; a cluster before its map is read,
    /// and the calls that are no bucket's: stats, key records, counts).
    site: PathBuf,
    cfg: BreakerConfig,
    /// How long a probe holds the host's probe slot before another call may probe.
    probe_timeout_ms: u64,
    /// Shared by the host's processes (the system clock, or CLOCK_MONOTONIC, host-wide).
    clock: Clock,
    /// The site's breaker, opened with the layer: a single server's every call finds it with no
    /// lookup (hashing its path twice a call was some 2,000 instructions, callgrind, issue 24).
    site_file: HostBreaker,
    /// The other servers' (a cluster's masters), opened on first use, by path.
    files: HashMap<PathBuf, HostBreaker, BuildHasherDefault<Fnv>>,
}

/// FNV-1a for the breakers' map: looked up on every call, by a path of this host's own
/// settings (nobody else's keys to collide), where SipHash over a path's components was a
/// twentieth of a Redis decision's client instructions (callgrind, issue 24).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    }
}

impl Breakers {
    /// The file of `node` ("" for the site's).
    fn path_of(&self, node: &str) -> PathBuf {
        if node.is_empty() {
            return self.site.clone();
        }
        // FNV-1a of the address: a stable name that carries no address into a path.
        let h = node.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut p = self.site.clone().into_os_string();
        p.push(format!("-{h:016x}"));
        PathBuf::from(p)
    }

    /// `node`'s breaker, opened if needed. A file that is not ours is the call's error; one that
    /// cannot be opened otherwise is no breaker (the call goes on as if closed).
    fn get(&mut self, node: &str) -> Result<Option<&mut HostBreaker>, StoreError> {
        if node.is_empty() {
            return Ok(Some(&mut self.site_file));
        }
        let path = self.path_of(node);
        if !self.files.contains_key(&path) {
            // The site's counts as one of them.
            if self.files.len() >= MAX_NODES - 1 {
                self.files.clear();
            }
            match HostBreaker::open(&path) {
                Ok(b) => {
                    self.files.insert(path.clone(), b);
                }
                Err(e) if e.kind() == ErrorKind::Misconfigured => return Err(e),
                Err(_) => return Ok(None),
            }
        }
        Ok(self.files.get_mut(&path))
    }

    /// The worst state of the host's breakers: any open is "open" (the files of the masters
    /// other workers met are looked for beside the site's).
    fn state(&mut self) -> BreakerState {
        let name = self.site.file_name().map(|n| {
            let mut n = n.to_os_string();
            n.push("-");
            n
        });
        let dir = self
            .site
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if let (Some(name), Ok(entries)) = (name, std::fs::read_dir(&dir)) {
            let mut found = 0;
            for e in entries.flatten() {
                let fname = e.file_name();
                if fname
                    .as_encoded_bytes()
                    .starts_with(name.as_encoded_bytes())
                    && found < MAX_NODES
                {
                    found += 1;
                    let path = dir.join(&fname);
                    if let Entry::Vacant(slot) = self.files.entry(path) {
                        if let Ok(b) = HostBreaker::open(slot.key()) {
                            slot.insert(b);
                        }
                    }
                }
            }
        }
        let (now, cfg) = ((self.clock)(), self.cfg);
        std::iter::once(&mut self.site_file)
            .chain(self.files.values_mut())
            .map(|b| {
                b.record(now)
                    .map_or(BreakerState::Closed, |r| r.state(&cfg, now))
            })
            .max_by_key(|s| s.gauge())
            .unwrap_or(BreakerState::Closed)
    }
}

pub struct Failover {
    primary: Box<dyn Store>,
    breakers: Option<Breakers>,
    open_local: Option<LocalStore>,
    local: Option<Box<dyn Store>>,
    /// See [`Failover::pause_after_failure`]: the clock and the pause, and the last failure
    /// of each server.
    pause: Option<(Clock, i64)>,
    failed_at: HashMap<String, i64>,
    log: Arc<OpsLog>,
}

impl Failover {
    /// The primary alone: its faults are the calls' (until [`Self::breaker`] and
    /// [`Self::local`] add the rest).
    pub fn new(primary: Box<dyn Store>, log: Arc<OpsLog>) -> Self {
        Self {
            primary,
            breakers: None,
            open_local: None,
            local: None,
            pause: None,
            failed_at: HashMap::new(),
            log,
        }
    }

    /// Puts the host's breakers in front of the primary's servers: the site's file at `site`
    /// (opened now: one that is not ours is an error), the others beside it.
    /// `probe_timeout_ms`: how long a probe holds the host's probe slot (so that a probe killed
    /// mid-call frees it); `clock`: shared by the host's processes.
    pub fn breaker(
        mut self,
        site: &Path,
        cfg: BreakerConfig,
        probe_timeout_ms: u64,
        clock: Clock,
    ) -> Result<Self, StoreError> {
        let b = Breakers {
            site: site.to_path_buf(),
            cfg,
            probe_timeout_ms,
            clock,
            site_file: HostBreaker::open(site)?,
            files: HashMap::default(),
        };
        self.breakers = Some(b);
        Ok(self)
    }

    /// Decides with the store `open` makes while the primary cannot.
    pub fn local(mut self, open: LocalStore) -> Self {
        self.open_local = Some(open);
        self
    }

    /// After a failure of a server (not a refusal by its breaker, which cost no wait), goes
    /// straight to the local store for `ms` (the primary's timeout) for that server's calls: the
    /// later steps of the same PHP call (a decision after its key check) never wait for a
    /// failing server a second time, before the host's breaker opens. `clock`: monotonic
    /// milliseconds.
    pub fn pause_after_failure(mut self, clock: Clock, ms: u64) -> Self {
        self.pause = Some((clock, ms.min(i64::MAX as u64) as i64));
        self
    }

    fn primary_just_failed(&self, node: &str) -> bool {
        match (&self.pause, self.failed_at.get(node), &self.open_local) {
            (Some((clock, ms)), Some(&at), Some(_)) => {
                let now = clock();
                now >= at && now - at < *ms
            }
            _ => false,
        }
    }

    /// The server `key`'s calls go to ("" when the primary does not tell them apart).
    fn node(&mut self, key: Option<&BucketKey>) -> String {
        match (key, &self.breakers) {
            (Some(k), Some(_)) => self
                .primary
                .node_of(k, &mut Counters::default())
                .unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// Whether this call may ask `node`, and as the probe or not (only a decision may probe).
    fn admit(&mut self, node: &str, call: Call) -> Result<Admit, StoreError> {
        let Some(bs) = self.breakers.as_mut() else {
            return Ok(Admit::Pass);
        };
        let Some(b) = bs.get(node)? else {
            return Ok(Admit::Pass);
        };
        renew(b, &self.log);
        let gate = b.gate();
        // Closed: the common call reads no clock.
        if gate == 0 {
            return Ok(Admit::Pass);
        }
        let (cfg, timeout, now) = (bs.cfg, bs.probe_timeout_ms, (bs.clock)());
        // A gate further ahead than any rule puts it is mended on the locked path.
        let bound = now.saturating_add(cfg.retry_ms.max(timeout) as i64);
        if now < gate && gate <= bound {
            return Ok(Admit::Refuse);
        }
        let Some(b) = bs.get(node)? else {
            return Ok(Admit::Pass);
        };
        Ok(b.transition(now, |r| match call {
            Call::Decision => r.admit(&cfg, now, timeout),
            Call::Other => r.admit_without_probe(),
        })
        .unwrap_or(Admit::Pass))
    }

    /// Runs `f` on the primary through `node`'s breaker; a failure adds its `redis_errors` to
    /// `carry` and, if it is an outage, is fed to the breaker's rules.
    fn ask_primary<T>(
        &mut self,
        call: Call,
        node: &str,
        carry: &mut Counters,
        f: impl FnOnce(&mut dyn Store, &mut Counters) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let admit = self.admit(node, call)?;
        if admit == Admit::Refuse {
            return Err(StoreError::new(ErrorKind::Unreachable, OPEN));
        }
        let result = f(self.primary.as_mut(), carry);
        // The common call: a success that was no probe leaves the breaker as it was.
        if result.is_ok() && admit.probe().is_none() {
            return result;
        }
        let Some(bs) = self.breakers.as_mut() else {
            return result;
        };
        if result.is_err() {
            carry.redis_errors += 1;
        }
        let (now, cfg) = ((bs.clock)(), bs.cfg);
        let Ok(Some(b)) = bs.get(node) else {
            return result;
        };
        let outage = result.as_ref().err().filter(|e| e.kind().is_outage());
        let name = if node.is_empty() { "redis" } else { node };
        if outage.is_none() {
            if let Some(p) = admit.probe() {
                let closed = b.transition(now, |r| {
                    r.succeeded(Some(p));
                    !r.open
                });
                if closed.unwrap_or(false) {
                    self.log.note(Event::BreakerClosed, name);
                }
            }
        }
        if let Some(e) = outage {
            let opened = b.transition(now, |r| r.failed(&cfg, now, admit.probe()));
            if opened.unwrap_or(false) {
                if self.open_local.is_some() {
                    carry.fallback_switches += 1;
                    self.log.note(Event::FallbackSwitched, e.what());
                } else {
                    self.log.note(Event::BreakerOpened, e.what());
                }
            }
        }
        result
    }

    /// The local store, opened if needed; None when there is no fallback.
    fn local_store(&mut self) -> Option<Result<&mut Box<dyn Store>, StoreError>> {
        if self.local.is_none() {
            let open = self.open_local.as_mut()?;
            match open() {
                Ok(s) => self.local = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
        self.local.as_mut().map(Ok)
    }

    /// How a call is answered, in one place: `f` on the primary, through the breaker of the
    /// server `key` lives on; on a fault answered "unavailable" ([`ErrorKind::answer`]) `f` on
    /// the local store, when there is one, with `extra` counted in its step (a fallback
    /// decision). True when the local store answered.
    fn either<T>(
        &mut self,
        call: Call,
        key: Option<&BucketKey>,
        carry: &mut Counters,
        extra: Counters,
        mut f: impl FnMut(&mut dyn Store, &mut Counters) -> Result<T, StoreError>,
    ) -> Result<(T, bool), StoreError> {
        let node = self.node(key);
        if !self.primary_just_failed(&node) {
            let e = match self.ask_primary(call, &node, carry, &mut f) {
                Ok(v) => return Ok((v, false)),
                Err(e) => e,
            };
            if e.kind().answer() == Answer::Error {
                return Err(e);
            }
            // The breaker's refusal cost no wait: no pause, so that a key check refused while
            // half-open leaves its request's decision the probe.
            if let (Some((clock, _)), false) = (&self.pause, refused(&e)) {
                let now = clock();
                self.failed_at.insert(node, now);
            }
            if self.open_local.is_none() {
                return Err(e);
            }
        }
        let mut carried = *carry;
        carried.add(&extra);
        let local = match self.local_store() {
            None => {
                return Err(StoreError::new(
                    ErrorKind::Unreachable,
                    "primary store unavailable and no local fallback",
                ))
            }
            Some(local) => local?,
        };
        let v = f(local.as_mut(), &mut carried)?;
        // Written by the local store's step (cleared), or, for a read, still to be written.
        *carry = carried;
        Ok((v, true))
    }

    /// The worst state of the host's breakers; None without any.
    fn state(&mut self) -> Option<BreakerState> {
        self.breakers.as_mut().map(Breakers::state)
    }

    /// Both stores' stats summed; with the primary unavailable, partial: the local ones (none
    /// without a local store), so that an operator still sees the breaker during an outage.
    fn stats(&mut self, carry: &mut Counters) -> Result<Stats, StoreError> {
        let primary = self.ask_primary(Call::Other, "", carry, |s, c| s.stats(c));
        let local = self
            .local_store()
            .map(|l| l.and_then(|l| l.stats(&mut Counters::default())));
        let mut s = match (primary, local) {
            (Ok(p), None) => p,
            // The local store's counts are the site's too: without them, partial.
            (Ok(p), Some(Err(_))) => Stats { partial: true, ..p },
            (Ok(p), Some(Ok(l))) => add(&p, &l),
            (Err(e), _) if e.kind().answer() == Answer::Error => return Err(e),
            (Err(_), Some(Ok(l))) => Stats { partial: true, ..l },
            (Err(_), _) => Stats {
                partial: true,
                ..Stats::default()
            },
        };
        s.breaker = self.state();
        Ok(s)
    }
}

/// Shares the host's breaker again after its file was truncated under this process (one log
/// line, see `OpsLog`). Until the file can be opened anew, the call decides with what the
/// poisoned mapping holds: zeros, a closed breaker (the primary's answer decides).
fn renew(b: &mut HostBreaker, log: &OpsLog) {
    let _ = b.renew();
    if b.take_truncated() {
        log.note(Event::StateFileDamaged, &b.path().display().to_string());
    }
}

fn add(a: &Stats, b: &Stats) -> Stats {
    let mut s = *a;
    s.counters.add(&b.counters);
    s.entries += b.entries;
    s.live_leases += b.live_leases;
    s
}

/// What a decision by the local store counts besides its reason.
const FALLBACK_DECISION: Counters = {
    let mut c = Counters::ZERO;
    c.fallback_decisions = 1;
    c
};

impl Store for Failover {
    fn acquire(
        &mut self,
        key: &BucketKey,
        ask: &Ask,
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<Acquired, StoreError> {
        let (mut a, local) = self.either(
            Call::Decision,
            Some(key),
            carry,
            FALLBACK_DECISION,
            |s, c| s.acquire(key, ask, lease_ttl_ms, c),
        )?;
        if local {
            a.verdict.source = Source::Fallback;
        }
        Ok(a)
    }

    /// As [`Store::acquire`]: the local store decides the whole compound call when the
    /// primary cannot, in its own single step. (A subject's buckets share one server.)
    fn acquire_all(
        &mut self,
        keys: &[BucketKey],
        asks: &[Ask],
        lease_ttl_ms: u64,
        carry: &mut Counters,
    ) -> Result<AcquiredAll, StoreError> {
        let (mut a, local) = self.either(
            Call::Decision,
            keys.first(),
            carry,
            FALLBACK_DECISION,
            |s, c| s.acquire_all(keys, asks, lease_ttl_ms, c),
        )?;
        if local {
            a.verdict.source = Source::Fallback;
            for v in &mut a.each {
                v.source = Source::Fallback;
            }
        }
        Ok(a)
    }

    fn peek(
        &mut self,
        key: &BucketKey,
        policy: &Policy,
        carry: &mut Counters,
    ) -> Result<Verdict, StoreError> {
        let (mut v, local) =
            self.either(Call::Decision, Some(key), carry, Counters::ZERO, |s, c| {
                s.peek(key, policy, c)
            })?;
        if local {
            v.source = Source::Fallback;
        }
        Ok(v)
    }

    /// A lease lives in the store that took it: the primary first, each lease through the
    /// breaker of its own server (a request's leases may live on several masters), then, for
    /// those not found there (or whose server is unavailable), the local store. Some not freed
    /// because a server is unavailable: that server's error, so that the caller tries again
    /// later. The local store's release writes none of the carried counts: they wait for the
    /// next step.
    fn release(&mut self, leases: &[LeaseToken], carry: &mut Counters) -> Result<u64, StoreError> {
        let all = leases.len() as u64;
        let mut by_node: Vec<(String, Vec<LeaseToken>)> = Vec::new();
        for l in leases {
            let node = self.node(Some(&l.key));
            match by_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, group)) => group.push(*l),
                None => by_node.push((node, vec![*l])),
            }
        }
        let (mut freed, mut elsewhere, mut failure) = (0, Vec::new(), None);
        for (node, group) in by_node {
            match self.ask_primary(Call::Other, &node, carry, |s, c| s.release(&group, c)) {
                Ok(n) => {
                    freed += n;
                    if n < group.len() as u64 {
                        elsewhere.extend(group);
                    }
                }
                Err(e) if e.kind().answer() == Answer::Error => return Err(e),
                Err(e) => {
                    failure.get_or_insert(e);
                    elsewhere.extend(group);
                }
            }
        }
        if !elsewhere.is_empty() {
            if let Some(Ok(l)) = self.local_store() {
                freed += l.release(&elsewhere, &mut Counters::default()).unwrap_or(0);
            }
        }
        match failure {
            Some(e) if freed < all => Err(e),
            _ => Ok(freed),
        }
    }

    /// Forgets the bucket in both stores (the local one may keep what an outage decided).
    /// The primary unavailable: its error, after the local store forgot it too.
    fn reset(&mut self, key: &BucketKey, carry: &mut Counters) -> Result<bool, StoreError> {
        let node = self.node(Some(key));
        let primary = self.ask_primary(Call::Other, &node, carry, |s, c| s.reset(key, c));
        let local = match self.local_store() {
            Some(Ok(l)) => l.reset(key, &mut Counters::default()).unwrap_or(false),
            _ => false,
        };
        Ok(primary? || local)
    }

    fn serve(&mut self, q: Query<'_>, carry: &mut Counters) -> Result<Reply, StoreError> {
        match q {
            Query::Stats => self.stats(carry).map(Reply::Stats),
            // A deny cache in front sees the decisions of two stores: it tracks no epoch.
            Query::RefillEpoch => Ok(Reply::Epoch(RefillEpoch::Untracked)),
            Query::Node(_) => self.primary.serve(q, carry),
            // Tokens go back to the primary only, through its server's breaker: the local
            // store took nothing for a decision of the primary, and a refund must never mint.
            // One that cannot reach the primary is the call's fault (answered false above):
            // the tokens stay taken, the safe side. (A call decided by the local store during
            // an outage gets nothing back either.)
            Query::Refund(key, _, _) => {
                let node = self.node(Some(key));
                self.ask_primary(Call::Other, &node, carry, |s, c| s.serve(q, c))
            }
            // Denials answered in front of the primary's decisions are the primary's, each
            // bucket's through its own server's breaker. The breaker's refusal (nothing added,
            // the batch may come again) only when every server's breaker refused; once some of
            // it went to a server, its outcome: what a breaker refused of it is dropped, not
            // sent again with the part already added (counted at most once, as the counters'
            // flush is).
            Query::AddDenials(d) => {
                let mut by_node: Vec<(String, Vec<(BucketKey, u64)>)> = Vec::new();
                for (k, n) in d {
                    let node = self.node(Some(k));
                    match by_node.iter_mut().find(|(m, _)| *m == node) {
                        Some((_, group)) => group.push((*k, *n)),
                        None => by_node.push((node, vec![(*k, *n)])),
                    }
                }
                let (mut failure, mut refusal, mut sent) = (None, None, false);
                for (node, group) in by_node {
                    let q = Query::AddDenials(&group);
                    match self.ask_primary(Call::Other, &node, carry, |s, c| s.serve(q, c)) {
                        Ok(_) => sent = true,
                        Err(e) if refused(&e) => {
                            refusal.get_or_insert(e);
                        }
                        Err(e) => {
                            sent = true;
                            failure.get_or_insert(e);
                        }
                    }
                }
                match (failure, refusal) {
                    (Some(e), _) => Err(e),
                    (None, Some(e)) if !sent => Err(e),
                    _ => Ok(Reply::Done),
                }
            }
            // Never a call to an unavailable primary: not at the end of each request.
            Query::Tick => {
                let closed = match self.breakers.as_mut().map(|bs| bs.get("")) {
                    None | Some(Ok(None)) => true,
                    Some(Ok(Some(b))) => {
                        renew(b, &self.log);
                        b.gate() == 0
                    }
                    Some(Err(_)) => false,
                };
                if closed {
                    self.primary.tick(carry);
                }
                if let Some(l) = self.local.as_mut() {
                    l.tick(&mut Counters::default());
                }
                Ok(Reply::Done)
            }
            Query::Flush => match self.ask_primary(Call::Other, "", carry, |s, c| s.flush(c)) {
                Ok(()) => {
                    if let Some(l) = self.local.as_mut() {
                        let _ = l.flush(&mut Counters::default());
                    }
                    Ok(Reply::Done)
                }
                Err(e) => match self.local.as_mut().map(|l| l.flush(carry)) {
                    Some(Ok(())) => Ok(Reply::Done),
                    _ => Err(e),
                },
            },
            // During an outage without a local store, the pressure view is empty, not an error.
            Query::Top(_) => match self.either(Call::Other, None, carry, Counters::ZERO, |s, c| {
                s.serve(q, c)
            }) {
                Err(e) if e.kind().answer() == Answer::Unavailable => Ok(Reply::Top(Vec::new())),
                r => r.map(|(r, _)| r),
            },
            Query::KeyRecord | Query::RecordKey(..) => self
                .either(Call::Other, None, carry, Counters::ZERO, |s, c| {
                    s.serve(q, c)
                })
                .map(|(r, _)| r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::Reason;
    use crate::storage::fake::{key, Fake, Manual, Serving};
    use std::cell::Cell;
    use std::os::unix::fs::PermissionsExt;
    use std::rc::Rc;

    const CFG: BreakerConfig = BreakerConfig {
        failures: 3,
        window_ms: 10_000,
        retry_ms: 1_000,
    };

    fn ask(inflight: u64) -> Ask {
        Ask::new(Policy::new(2, 60_000).unwrap(), 1, inflight)
    }

    /// One host: its breaker file, a clock, the primary every worker asks and the host's
    /// local store.
    struct Host {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        time: Manual,
        primary: Fake,
        local: Fake,
        opened: Rc<Cell<u32>>,
        lines: Arc<std::sync::Mutex<Vec<String>>>,
    }

    fn host() -> Host {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().join("db.sqlite.breaker");
        let time = Manual::at(1_000);
        Host {
            _dir: dir,
            path,
            primary: Fake::new(time.clock()),
            local: Fake::new(time.clock()),
            time,
            opened: Rc::default(),
            lines: Arc::default(),
        }
    }

    impl Host {
        fn log(&self) -> Arc<OpsLog> {
            let lines = Arc::clone(&self.lines);
            OpsLog::new(
                move |l| lines.lock().unwrap().push(l.to_string()),
                self.time.clock(),
            )
        }

        fn lines(&self) -> Vec<String> {
            self.lines.lock().unwrap().clone()
        }

        fn factory(&self) -> LocalStore {
            let (local, opened) = (self.local.clone(), Rc::clone(&self.opened));
            Box::new(move || {
                opened.set(opened.get() + 1);
                Ok(local.boxed())
            })
        }

        fn with_breaker(&self, f: Failover, cfg: BreakerConfig) -> Failover {
            f.breaker(&self.path, cfg, 50, self.time.clock()).unwrap()
        }

        /// A worker with the breaker only (`ratelimit.redis_fallback=none`).
        fn breaker_only(&self) -> Failover {
            self.with_breaker(Failover::new(self.primary.boxed(), self.log()), CFG)
        }

        /// A worker with the local fallback only.
        fn fallback_only(&self) -> Failover {
            Failover::new(self.primary.boxed(), OpsLog::none()).local(self.factory())
        }

        /// A worker with both, as shipped (breaker of 2 failures).
        fn worker(&self) -> Failover {
            let cfg = BreakerConfig { failures: 2, ..CFG };
            self.with_breaker(
                Failover::new(self.primary.boxed(), self.log()).local(self.factory()),
                cfg,
            )
        }
    }

    fn acquire(f: &mut Failover, inflight: u64) -> Result<Acquired, StoreError> {
        f.acquire(&key(1), &ask(inflight), 60_000, &mut Counters::default())
    }

    fn stats(f: &mut Failover) -> Result<Stats, StoreError> {
        (f as &mut dyn Store).stats(&mut Counters::default())
    }

    /// Fails the primary three times: the host's breaker opens.
    fn open_it(h: &Host, f: &mut Failover) {
        h.primary.fail(Some(ErrorKind::Timeout));
        for _ in 0..3 {
            assert_eq!(acquire(f, 0).unwrap_err().kind(), ErrorKind::Timeout);
        }
    }

    /// Opens the site's breaker with decisions timing out on a server whose cheap calls (the
    /// counters, the key record, stats) still answer, as when only the decision command hangs;
    /// then lets `retry_ms` pass: half-open.
    fn half_open_with_only_decisions_sick(h: &Host, f: &mut Failover) {
        h.primary
            .0
            .borrow_mut()
            .failing
            .insert(key(1).bucket, ErrorKind::Timeout);
        for _ in 0..3 {
            assert_eq!(acquire(f, 0).unwrap_err().kind(), ErrorKind::Timeout);
        }
        h.time.set(2_000);
        assert_eq!(f.state(), Some(BreakerState::HalfOpen));
    }

    fn refund(f: &mut Failover) -> Result<bool, StoreError> {
        (f as &mut dyn Store).refund(&key(1), &ask(0).policy, 1, &mut Counters::default())
    }

    // Refunds.

    #[test]
    fn a_refund_goes_to_the_primary_and_never_opens_the_local_store() {
        let h = host();
        let mut w = h.worker();
        assert!(acquire(&mut w, 0).unwrap().verdict.allowed);
        assert!(refund(&mut w).unwrap());
        assert_eq!(h.primary.0.borrow().buckets[&key(1).bucket].tokens, 2_000);
        assert_eq!(h.opened.get(), 0);
    }

    #[test]
    fn a_refund_that_cannot_reach_the_primary_gives_nothing_to_the_local_store() {
        let h = host();
        let mut w = h.worker();
        h.primary.fail(Some(ErrorKind::Timeout));
        let d = acquire(&mut w, 0).unwrap();
        assert_eq!(
            (d.verdict.allowed, d.verdict.source),
            (true, Source::Fallback)
        );
        let e = refund(&mut w).unwrap_err();
        assert!(e.kind().is_transient(), "{e}");
        assert_eq!(
            h.local.0.borrow().buckets[&key(1).bucket].tokens,
            1_000,
            "the local bucket keeps what it took"
        );
    }

    // The breaker.

    #[test]
    fn a_call_whose_breaker_file_was_truncated_asks_the_primary_and_the_next_opens_it_anew() {
        let h = host();
        let mut a = h.breaker_only();
        let other = Fake::new(h.time.clock());
        let mut b = h.with_breaker(Failover::new(other.boxed(), h.log()), CFG);
        open_it(&h, &mut a);
        h.lines.lock().unwrap().clear();
        assert_eq!(acquire(&mut b, 0).unwrap_err().what(), OPEN);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&h.path)
            .unwrap()
            .set_len(0)
            .unwrap();
        // The gate reads zeros (a fault, on private memory): closed; the primary decides.
        assert!(acquire(&mut b, 0).unwrap().verdict.allowed);
        assert_eq!(other.calls(), 1);
        assert!(h.lines().is_empty());
        // The next call opens the file anew (extended, rebuilt closed) and says so once.
        assert!(acquire(&mut b, 0).unwrap().verdict.allowed);
        assert_eq!(
            std::fs::metadata(&h.path).unwrap().len(),
            crate::storage::hostbreaker::LEN as u64
        );
        let lines = h.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("truncated") && lines[0].contains(h.path.to_str().unwrap()),
            "{lines:?}"
        );
    }

    #[test]
    fn closed_it_passes_calls_and_their_answers_through() {
        let h = host();
        let mut b = h.breaker_only();
        assert!(acquire(&mut b, 0).unwrap().verdict.allowed);
        assert_eq!(h.primary.calls(), 1);
        assert_eq!(b.state(), Some(BreakerState::Closed));
    }

    #[test]
    fn open_it_gates_compound_calls_too() {
        let h = host();
        let mut b = h.breaker_only();
        open_it(&h, &mut b);
        let calls = h.primary.calls();
        let e = b
            .acquire_all(
                &[key(1), key(2)],
                &[ask(0), ask(0)],
                60_000,
                &mut Counters::default(),
            )
            .unwrap_err();
        assert_eq!((e.kind(), e.what()), (ErrorKind::Unreachable, OPEN));
        assert_eq!(h.primary.calls(), calls, "the primary was not asked");
    }

    #[test]
    fn open_it_fails_fast_without_calling_the_primary() {
        let h = host();
        let mut b = h.breaker_only();
        open_it(&h, &mut b);
        let calls = h.primary.calls();
        for _ in 0..100 {
            let e = acquire(&mut b, 0).unwrap_err();
            assert_eq!((e.kind(), e.what()), (ErrorKind::Unreachable, OPEN));
        }
        assert!(b
            .peek(&key(1), &ask(0).policy, &mut Counters::default())
            .is_err());
        assert_eq!(h.primary.calls(), calls, "the primary was not asked");
        assert_eq!(b.state(), Some(BreakerState::Open));
    }

    #[test]
    fn one_workers_failures_open_it_for_every_worker_of_the_host() {
        let h = host();
        let mut a = h.breaker_only();
        let other = Fake::new(h.time.clock());
        let mut b = h.with_breaker(Failover::new(other.boxed(), OpsLog::none()), CFG);
        open_it(&h, &mut a);
        assert!(acquire(&mut b, 0).is_err());
        assert_eq!(other.calls(), 0, "b never paid for the outage");
    }

    #[test]
    fn an_opening_is_logged_once_by_the_worker_that_made_it() {
        let h = host();
        let (mut a, mut b) = (h.breaker_only(), h.breaker_only());
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut a, 0).unwrap_err();
        acquire(&mut b, 0).unwrap_err();
        acquire(&mut a, 0).unwrap_err(); // the third of the host's: a opens it
        acquire(&mut b, 0).unwrap_err(); // refused
        acquire(&mut a, 0).unwrap_err(); // refused
        let lines = h.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("host breaker open"), "{lines:?}");
    }

    #[test]
    fn after_retry_ms_one_probe_goes_through_and_its_success_closes_it() {
        let h = host();
        let mut a = h.breaker_only();
        let other = Fake::new(h.time.clock());
        let mut b = h.with_breaker(Failover::new(other.boxed(), OpsLog::none()), CFG);
        open_it(&h, &mut a);
        h.primary.fail(None);
        h.time.set(1_000 + 1_000);
        assert_eq!(a.state(), Some(BreakerState::HalfOpen));
        // a holds the probe while b comes: b is refused (simulated by taking the slot first).
        let slot = a.admit("", Call::Decision).unwrap();
        assert!(slot.probe().is_some());
        assert!(acquire(&mut b, 0).is_err());
        assert_eq!(other.calls(), 0);
        // The slot's holder died; its deadline (50 ms) passes; b probes and succeeds.
        h.time.set(2_050);
        assert!(acquire(&mut b, 0).unwrap().verdict.allowed);
        assert_eq!(b.state(), Some(BreakerState::Closed));
        assert!(acquire(&mut a, 0).is_ok());
    }

    #[test]
    fn a_failed_probe_reopens_it() {
        let h = host();
        let mut a = h.breaker_only();
        open_it(&h, &mut a);
        h.time.set(2_000);
        let calls = h.primary.calls();
        assert_eq!(acquire(&mut a, 0).unwrap_err().kind(), ErrorKind::Timeout);
        assert_eq!(h.primary.calls(), calls + 1, "the probe asked the primary");
        assert_eq!(a.state(), Some(BreakerState::Open));
        h.time.set(2_999);
        assert_eq!(acquire(&mut a, 0).unwrap_err().what(), OPEN);
        assert_eq!(h.primary.calls(), calls + 1);
    }

    /// The probe must prove that decisions work: a counters flush that a sick decision path
    /// does not stop never closes the breaker, and every worker does not go back to waiting.
    #[test]
    fn half_open_a_call_that_is_no_decision_does_not_close_it_and_the_next_decision_probes() {
        let h = host();
        let mut a = h.breaker_only();
        half_open_with_only_decisions_sick(&h, &mut a);
        let _ = (&mut a as &mut dyn Store).flush(&mut Counters::default());
        assert_eq!(a.state(), Some(BreakerState::HalfOpen), "not closed by it");
        let calls = h.primary.calls();
        assert_eq!(acquire(&mut a, 0).unwrap_err().kind(), ErrorKind::Timeout);
        assert_eq!(h.primary.calls(), calls + 1, "the decision was the probe");
        assert_eq!(
            acquire(&mut a, 0).unwrap_err().what(),
            OPEN,
            "its failure reopened it: the next decision waits for nothing"
        );
    }

    /// While half-open, a call that is no decision gets what it gets while open: the breaker's
    /// error at once, the primary not asked; stats partial, the pressure view empty, a release
    /// an error to try again, a refund nothing back, the carried counts still carried.
    #[test]
    fn half_open_a_call_that_is_no_decision_is_refused_at_once_as_while_open() {
        let h = host();
        let mut a = h.breaker_only();
        let lease = a
            .acquire(&key(2), &ask(1), 60_000, &mut Counters::default())
            .unwrap()
            .lease
            .unwrap();
        half_open_with_only_decisions_sick(&h, &mut a);
        let calls = h.primary.calls();
        let mut carried = Counters {
            unavailable: 1,
            ..Counters::default()
        };
        let s = &mut a as &mut dyn Store;
        let refused = [
            s.flush(&mut carried).map(drop),
            s.key_record(&mut carried).map(drop),
            s.release(&[lease], &mut carried).map(drop),
            s.reset(&key(2), &mut carried).map(drop),
            s.refund(&key(2), &ask(0).policy, 1, &mut carried).map(drop),
            s.add_denials(&[(key(2), 1)], &mut carried),
        ];
        for r in refused {
            assert_eq!(r.unwrap_err().what(), OPEN);
        }
        let stats = s.stats(&mut carried).unwrap();
        assert_eq!(
            (stats.partial, stats.breaker),
            (true, Some(BreakerState::HalfOpen))
        );
        assert_eq!(s.top(10, &mut carried).unwrap(), Vec::new());
        assert_eq!(h.primary.calls(), calls, "the primary was not asked");
        assert_eq!(carried.unavailable, 1, "still the caller's to write");
        assert_eq!(h.primary.written().unavailable, 0);
        assert_eq!(a.state(), Some(BreakerState::HalfOpen));
    }

    /// Each decision (acquire, acquire_all, peek) may be the probe; its success closes the
    /// breaker for every call.
    #[test]
    fn half_open_a_decision_is_the_probe_and_its_success_closes_it() {
        type Decide = fn(&mut Failover) -> Result<(), StoreError>;
        let decisions: [(&str, Decide); 3] = [
            ("acquire", |f| acquire(f, 0).map(drop)),
            ("acquire_all", |f| {
                let mut c = Counters::default();
                f.acquire_all(&[key(1)], &[ask(0)], 60_000, &mut c)
                    .map(drop)
            }),
            ("peek", |f| {
                let mut c = Counters::default();
                f.peek(&key(1), &ask(0).policy, &mut c).map(drop)
            }),
        ];
        for (name, decide) in decisions {
            let h = host();
            let mut a = h.breaker_only();
            open_it(&h, &mut a);
            h.primary.fail(None);
            h.time.set(2_000);
            let calls = h.primary.calls();
            decide(&mut a).unwrap();
            assert_eq!(h.primary.calls(), calls + 1, "{name}: the probe");
            assert_eq!(a.state(), Some(BreakerState::Closed), "{name}");
            (&mut a as &mut dyn Store)
                .flush(&mut Counters::default())
                .unwrap();
            assert_eq!(
                h.primary.calls(),
                calls + 2,
                "{name}: then every call passes"
            );
        }
    }

    /// Every failed call is a `redis_errors`; only outages (no answer in time, no connection)
    /// open the breaker: a server that answered with an error is up.
    #[test]
    fn every_failed_call_is_a_redis_error_and_only_outages_open_it() {
        let h = host();
        let mut a = h.breaker_only();
        let mut carry = Counters::default();
        for kind in [
            ErrorKind::Misconfigured,
            ErrorKind::Io,
            ErrorKind::Corrupt,
            ErrorKind::Full,
            ErrorKind::Unreachable,
            ErrorKind::Timeout,
        ] {
            h.primary.fail(Some(kind));
            a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
        }
        assert_eq!(
            a.state(),
            Some(BreakerState::Closed),
            "two outages of three"
        );
        a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
        let e = a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
        assert_eq!(e.what(), OPEN, "refused: open");
        assert_eq!(carry.redis_errors, 7, "the refused call is no call");
    }

    /// A damaged value (another tenant's hash at a bucket's name) fails its own calls, never
    /// the host's: the breaker stays closed and the other subjects are decided.
    #[test]
    fn a_damaged_value_never_opens_the_breaker() {
        let h = host();
        let mut a = h.breaker_only();
        h.primary
            .0
            .borrow_mut()
            .failing
            .insert(key(1).bucket, ErrorKind::Corrupt);
        for _ in 0..20 {
            assert_eq!(acquire(&mut a, 0).unwrap_err().kind(), ErrorKind::Corrupt);
        }
        assert_eq!(a.state(), Some(BreakerState::Closed));
        let other = a.acquire(&key(2), &ask(0), 60_000, &mut Counters::default());
        assert!(other.unwrap().verdict.allowed);
    }

    /// Two masters, one stopped: its subjects fail (then are refused at once), the other
    /// master's keep being decided by the store; stats report the open breaker.
    #[test]
    fn a_sick_node_stops_only_its_own_subjects() {
        let h = host();
        {
            let mut st = h.primary.0.borrow_mut();
            st.nodes.insert(key(1).bucket, "10.0.0.1:7000".into());
            st.nodes.insert(key(2).bucket, "10.0.0.2:7000".into());
            st.failing.insert(key(1).bucket, ErrorKind::Timeout);
        }
        let (mut a, mut b) = (h.breaker_only(), h.breaker_only());
        let mut carry = Counters::default();
        for _ in 0..3 {
            let e = a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Timeout);
        }
        let calls = h.primary.calls();
        let e = b.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
        assert_eq!(
            e.what(),
            OPEN,
            "the node's breaker is the host's: another worker"
        );
        assert_eq!(h.primary.calls(), calls, "not asked");
        for w in [&mut a, &mut b] {
            let d = w.acquire(&key(2), &ask(0), 60_000, &mut carry).unwrap();
            assert_eq!(d.verdict.source, Source::Store, "the healthy node decides");
        }
        assert_eq!(stats(&mut b).unwrap().breaker, Some(BreakerState::Open));
        let unknown = a.acquire(&key(3), &ask(0), 60_000, &mut carry).unwrap();
        assert!(
            unknown.verdict.allowed,
            "no known node: the site's breaker, closed"
        );
    }

    /// A request's leases on two masters, one of them stopped: the release's failures are the
    /// sick master's, never fed to the healthy one's breaker, whose subjects keep deciding.
    #[test]
    fn a_release_spanning_masters_never_opens_a_healthy_masters_breaker() {
        let h = host();
        {
            let mut st = h.primary.0.borrow_mut();
            st.nodes.insert(key(1).bucket, "10.0.0.1:7000".into());
            st.nodes.insert(key(2).bucket, "10.0.0.2:7000".into());
        }
        let mut a = h.breaker_only();
        let mut carry = Counters::default();
        let healthy = a.acquire(&key(1), &ask(1), 60_000, &mut carry).unwrap();
        let sick = a.acquire(&key(2), &ask(1), 60_000, &mut carry).unwrap();
        let leases = [healthy.lease.unwrap(), sick.lease.unwrap()];
        h.primary
            .0
            .borrow_mut()
            .failing
            .insert(key(2).bucket, ErrorKind::Timeout);
        for _ in 0..3 {
            assert!(a.release(&leases, &mut carry).is_err());
        }
        let d = a.acquire(&key(1), &ask(0), 60_000, &mut carry);
        assert!(
            d.as_ref().is_ok_and(|d| d.verdict.source == Source::Store),
            "the healthy master's subject: {d:?}"
        );
    }

    /// With the local fallback, a sick node's subjects are decided locally while the healthy
    /// node's are still Redis's, also within the pause after a failure.
    #[test]
    fn with_a_sick_node_only_its_subjects_fall_back() {
        let h = host();
        {
            let mut st = h.primary.0.borrow_mut();
            st.nodes.insert(key(1).bucket, "10.0.0.1:7000".into());
            st.nodes.insert(key(2).bucket, "10.0.0.2:7000".into());
            st.failing.insert(key(1).bucket, ErrorKind::Timeout);
        }
        let mut w = h.worker().pause_after_failure(h.time.clock(), 50);
        let mut carry = Counters::default();
        let sick = w.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap();
        assert_eq!(sick.verdict.source, Source::Fallback);
        let healthy = w.acquire(&key(2), &ask(0), 60_000, &mut carry).unwrap();
        assert_eq!(
            healthy.verdict.source,
            Source::Store,
            "not paused: another node"
        );
    }

    #[test]
    fn a_server_refusing_our_settings_never_opens_the_breaker() {
        let h = host();
        let mut a = h.breaker_only();
        let mut carry = Counters::default();
        h.primary.fail(Some(ErrorKind::Misconfigured));
        for _ in 0..20 {
            let e = a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Misconfigured);
        }
        assert_eq!(a.state(), Some(BreakerState::Closed));
        assert_eq!(carry.redis_errors, 20);
    }

    #[test]
    fn a_probe_meeting_a_server_that_refuses_our_settings_closes_the_breaker() {
        let h = host();
        let mut a = h.breaker_only();
        open_it(&h, &mut a);
        h.time.set(2_000);
        h.primary.fail(Some(ErrorKind::Misconfigured));
        assert_eq!(
            acquire(&mut a, 0).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
        assert_eq!(a.state(), Some(BreakerState::Closed));
        // Every call then asks the server, and gets the error the operator must fix.
        assert_eq!(
            acquire(&mut a, 0).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
    }

    #[test]
    fn carried_redis_errors_are_written_by_the_next_successful_call_once() {
        let h = host();
        let mut a = h.breaker_only();
        let mut carry = Counters::default();
        h.primary.fail(Some(ErrorKind::Timeout));
        a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap_err();
        let s = (&mut a as &mut dyn Store).stats(&mut carry).unwrap();
        assert!(s.partial, "Redis timing out: partial stats, not an error");
        h.primary.fail(None);
        a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap();
        a.acquire(&key(1), &ask(0), 60_000, &mut carry).unwrap();
        assert_eq!(h.primary.written().redis_errors, 2);
        assert_eq!(carry, Counters::default());
        assert_eq!(stats(&mut a).unwrap().counters.redis_errors, 2);
    }

    /// Operators are never blind: with the default `redis_fallback=none` and Redis down, the
    /// stats answer (partial, the breaker open) and the pressure view is empty, not an error.
    #[test]
    fn during_an_outage_stats_are_partial_with_the_breaker_and_top_is_empty() {
        let h = host();
        let mut a = h.breaker_only();
        open_it(&h, &mut a);
        let s = stats(&mut a).unwrap();
        assert_eq!((s.partial, s.breaker), (true, Some(BreakerState::Open)));
        let top = (&mut a as &mut dyn Store).top(10, &mut Counters::default());
        assert_eq!(top.unwrap(), Vec::new());
        h.primary.fail(Some(ErrorKind::Misconfigured));
        h.time.set(2_000);
        // Stats never probe: a decision's probe meets the server and closes the breaker.
        assert_eq!(stats(&mut a).unwrap().breaker, Some(BreakerState::HalfOpen));
        acquire(&mut a, 0).unwrap_err();
        let e = stats(&mut a).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::Misconfigured,
            "what the operator must fix"
        );
    }

    #[test]
    fn during_an_outage_stats_are_the_local_stores_marked_partial() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        let s = stats(&mut f).unwrap();
        assert_eq!((s.partial, s.counters.fallback_decisions), (true, 1));
    }

    #[test]
    fn stats_report_the_breaker_state() {
        let h = host();
        let mut a = h.breaker_only();
        assert_eq!(stats(&mut a).unwrap().breaker, Some(BreakerState::Closed));
    }

    // The local fallback.

    #[test]
    fn a_failed_primary_is_not_asked_again_within_the_pause() {
        let h = host();
        let mut f = h.fallback_only().pause_after_failure(h.time.clock(), 50);
        h.primary.fail(Some(ErrorKind::Timeout));
        // The key check fails over, then the decision of the same call goes local at once.
        (&mut f as &mut dyn Store)
            .key_record(&mut Counters::default())
            .unwrap();
        let asked = h.primary.calls();
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Fallback);
        assert_eq!(
            h.primary.calls(),
            asked,
            "the primary was not asked within the pause"
        );
        // After the pause it is asked again (and answers, now that it works).
        h.primary.fail(None);
        h.time.set(1_050);
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Store);
        assert_eq!(h.primary.calls(), asked + 1);
    }

    /// A refusal by the breaker cost no wait and is no failure of the server: it starts no
    /// pause. A request's key check refused while half-open leaves its decision the probe.
    #[test]
    fn half_open_a_refused_key_check_leaves_the_same_requests_decision_the_probe() {
        let h = host();
        let mut w = h.worker().pause_after_failure(h.time.clock(), 50);
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut w, 0).unwrap();
        h.time.set(1_050); // past the pause: the second failure opens it
        acquire(&mut w, 0).unwrap();
        assert_eq!(w.state(), Some(BreakerState::Open));
        h.primary.fail(None);
        h.time.set(2_050);
        assert_eq!(w.state(), Some(BreakerState::HalfOpen));
        (&mut w as &mut dyn Store)
            .key_record(&mut Counters::default())
            .unwrap();
        let d = acquire(&mut w, 0).unwrap();
        assert_eq!(d.verdict.source, Source::Store, "the decision probed");
        assert_eq!(w.state(), Some(BreakerState::Closed));
    }

    #[test]
    fn a_compound_call_is_decided_locally_while_the_primary_is_unavailable() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        let a = f
            .acquire_all(
                &[key(1), key(2)],
                &[ask(0), ask(0)],
                60_000,
                &mut Counters::default(),
            )
            .unwrap();
        assert!(a.verdict.allowed);
        assert!(a
            .each
            .iter()
            .chain([&a.verdict])
            .all(|v| v.source == Source::Fallback));
        assert_eq!(h.local.written().fallback_decisions, 1);
    }

    #[test]
    fn the_primary_decides_while_it_answers_and_the_local_store_is_not_opened() {
        let h = host();
        let mut f = h.fallback_only();
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(a.verdict.source, Source::Store);
        assert_eq!(h.opened.get(), 0, "not opened before it is needed");
    }

    #[test]
    fn on_a_transient_or_storage_fault_the_local_store_decides_and_says_so() {
        for kind in [ErrorKind::Timeout, ErrorKind::Unreachable, ErrorKind::Io] {
            let h = host();
            let mut f = h.fallback_only();
            h.primary.fail(Some(kind));
            let a = acquire(&mut f, 0).unwrap();
            assert_eq!(
                (a.verdict.allowed, a.verdict.source),
                (true, Source::Fallback)
            );
            assert_eq!(h.local.written().allowed, 1, "{kind:?}");
            assert_eq!(
                h.local.written().fallback_decisions,
                1,
                "counted in the same step"
            );
        }
    }

    #[test]
    fn the_local_store_keeps_its_own_buckets_for_the_host() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        acquire(&mut f, 0).unwrap();
        let a = acquire(&mut f, 0).unwrap();
        assert_eq!(
            (a.verdict.reason, a.verdict.source),
            (Reason::Rate, Source::Fallback)
        );
    }

    #[test]
    fn a_misconfigured_primary_is_an_error_not_a_fallback() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Misconfigured));
        assert_eq!(
            acquire(&mut f, 0).unwrap_err().kind(),
            ErrorKind::Misconfigured
        );
        assert_eq!(h.local.calls(), 0);
    }

    #[test]
    fn without_a_local_store_the_primarys_fault_is_the_answer() {
        let h = host();
        let mut f = Failover::new(h.primary.boxed(), OpsLog::none());
        h.primary.fail(Some(ErrorKind::Timeout));
        assert_eq!(acquire(&mut f, 0).unwrap_err().kind(), ErrorKind::Timeout);
    }

    #[test]
    fn a_local_store_that_cannot_be_opened_is_tried_again_at_the_next_need() {
        let h = host();
        let tries = Rc::new(Cell::new(0));
        let open: LocalStore = {
            let (local, tries) = (h.local.clone(), Rc::clone(&tries));
            Box::new(move || {
                tries.set(tries.get() + 1);
                if tries.get() == 1 {
                    Err(StoreError::new(ErrorKind::Busy, "local busy"))
                } else {
                    Ok(local.boxed())
                }
            })
        };
        let mut f = Failover::new(h.primary.boxed(), OpsLog::none()).local(open);
        h.primary.fail(Some(ErrorKind::Timeout));
        assert_eq!(acquire(&mut f, 0).unwrap_err().what(), "local busy");
        assert_eq!(acquire(&mut f, 0).unwrap().verdict.source, Source::Fallback);
        assert_eq!(tries.get(), 2);
    }

    #[test]
    fn a_lease_taken_by_the_fallback_is_released_there() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        let lease = acquire(&mut f, 1).unwrap().lease.unwrap();
        h.primary.fail(None);
        assert_eq!(f.release(&[lease], &mut Counters::default()).unwrap(), 1);
        assert!(h.local.0.borrow().leases.is_empty());
        assert_eq!(h.primary.calls(), 2, "the primary was asked first");
    }

    #[test]
    fn a_release_of_a_primary_lease_while_it_is_down_is_an_error_to_try_again() {
        let h = host();
        let mut f = h.fallback_only();
        let lease = acquire(&mut f, 1).unwrap().lease.unwrap();
        h.primary.fail(Some(ErrorKind::Timeout));
        let mut carried = Counters {
            unavailable: 1,
            ..Counters::default()
        };
        assert!(f.release(&[lease], &mut carried).is_err());
        assert_eq!(
            h.local.written().unavailable,
            0,
            "the caller's counts not written"
        );
        assert_eq!(carried.unavailable, 1, "still the caller's to write");
    }

    #[test]
    fn carried_counts_are_written_once_by_the_next_successful_step() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        let mut carried = Counters {
            unavailable: 1,
            ..Counters::default()
        };
        acquire(&mut f, 0).unwrap();
        f.acquire(&key(1), &ask(0), 60_000, &mut carried).unwrap();
        assert_eq!(carried, Counters::default());
        h.primary.fail(None);
        acquire(&mut f, 0).unwrap();
        let (p, l) = (h.primary.written(), h.local.written());
        assert_eq!(l.unavailable + p.unavailable, 1);
        assert_eq!(l.fallback_decisions + p.fallback_decisions, 2);
    }

    #[test]
    fn stats_sum_both_stores_and_fall_back_to_the_local_ones() {
        let h = host();
        let mut f = h.fallback_only();
        acquire(&mut f, 0).unwrap();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        let s = stats(&mut f).unwrap();
        assert_eq!((s.counters.allowed, s.counters.fallback_decisions), (1, 1));
        h.primary.fail(None);
        let s = stats(&mut f).unwrap();
        assert_eq!((s.counters.allowed, s.entries), (2, 2));
    }

    /// A scrape must never see a counter fall (a scraper reads it as a reset): stats that
    /// lack the local store's counts (it cannot be read now) say they are partial.
    #[test]
    fn stats_without_the_local_stores_counts_are_partial() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        h.primary.fail(None);
        let whole = stats(&mut f).unwrap();
        assert_eq!(whole.counters.fallback_decisions, 1);
        h.local.fail(Some(ErrorKind::Busy));
        let s = stats(&mut f).unwrap();
        assert!(
            s.partial || s.counters.fallback_decisions >= whole.counters.fallback_decisions,
            "a counter fell from {:?} to {:?} and the stats are not marked partial",
            whole.counters,
            s.counters
        );
    }

    #[test]
    fn a_reset_forgets_the_bucket_in_both_stores() {
        let h = host();
        let mut f = h.fallback_only();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut f, 0).unwrap();
        h.primary.fail(None);
        acquire(&mut f, 0).unwrap();
        assert!(f.reset(&key(1), &mut Counters::default()).unwrap());
        assert!(h.primary.0.borrow().buckets.is_empty());
        assert!(h.local.0.borrow().buckets.is_empty());
    }

    // Both, as shipped: two workers of one host.

    #[test]
    fn a_switch_is_counted_once_per_host_however_many_workers_fall_back() {
        let h = host();
        let (mut a, mut b) = (h.worker(), h.worker());
        let (mut ca, mut cb) = (Counters::default(), Counters::default());
        h.primary.fail(Some(ErrorKind::Timeout));
        for _ in 0..5 {
            a.acquire(&key(1), &ask(0), 60_000, &mut ca).unwrap();
            b.acquire(&key(1), &ask(0), 60_000, &mut cb).unwrap();
        }
        assert_eq!(h.local.written().fallback_switches, 1);
        assert_eq!(h.local.written().fallback_decisions, 10);
        assert_eq!(
            h.local.written().redis_errors,
            2,
            "the two that opened it; then none asked"
        );
        assert_eq!(h.primary.calls(), 2);
        assert_eq!(stats(&mut a).unwrap().breaker, Some(BreakerState::Open));
        let lines = h.lines();
        assert_eq!(lines.len(), 1, "one line per switch: {lines:?}");
        assert!(lines[0].contains("fallback"), "{lines:?}");
    }

    #[test]
    fn with_the_breaker_open_decisions_are_fast_and_local() {
        let h = host();
        let mut a = h.worker();
        h.primary.fail(Some(ErrorKind::Timeout));
        acquire(&mut a, 0).unwrap();
        acquire(&mut a, 0).unwrap();
        let calls = h.primary.calls();
        let d = acquire(&mut a, 0).unwrap();
        assert_eq!(d.verdict.source, Source::Fallback);
        assert_eq!(h.primary.calls(), calls);
        // After retry_ms the probe finds the primary back: the store decides again.
        h.primary.fail(None);
        h.time.set(2_000);
        assert_eq!(acquire(&mut a, 0).unwrap().verdict.source, Source::Store);
        assert_eq!(stats(&mut a).unwrap().breaker, Some(BreakerState::Closed));
    }

    /// The denials a primary was given.
    type Seen = Rc<std::cell::RefCell<Vec<(BucketKey, u64)>>>;

    /// A fake primary with two masters (key(1) on the first, key(2) on the second) whose
    /// second's breaker is half-open, recording the denials it is given.
    fn second_master_half_open(h: &Host) -> (Failover, Seen) {
        {
            let mut st = h.primary.0.borrow_mut();
            st.nodes.insert(key(1).bucket, "10.0.0.1:7000".into());
            st.nodes.insert(key(2).bucket, "10.0.0.2:7000".into());
        }
        let seen = Seen::default();
        let added = Rc::clone(&seen);
        // The primary, recording the denials it added (the fake's `add_denials` keeps none).
        let primary = Box::new(Serving(
            h.primary.boxed(),
            Box::new(move |q, inner, c| {
                let r = inner.serve(q, c);
                if let (Query::AddDenials(d), Ok(_)) = (q, &r) {
                    added.borrow_mut().extend_from_slice(d);
                }
                r
            }),
        ));
        let mut a = h.with_breaker(Failover::new(primary, h.log()), CFG);
        h.primary
            .0
            .borrow_mut()
            .failing
            .insert(key(2).bucket, ErrorKind::Timeout);
        for _ in 0..3 {
            assert!(a
                .acquire(&key(2), &ask(0), 60_000, &mut Counters::default())
                .is_err());
        }
        h.primary.0.borrow_mut().failing.clear();
        h.time.set(2_500);
        (a, seen)
    }

    fn counted(seen: &Seen, k: BucketKey) -> u64 {
        seen.borrow()
            .iter()
            .filter(|(b, _)| b.bucket == k.bucket)
            .map(|(_, n)| n)
            .sum()
    }

    /// Denials of two masters' buckets, one master's breaker half-open: the other master's are
    /// added and the call succeeds, so that its caller (the deny cache) never sends them again
    /// with the refused ones (red team: counted twice); the refused ones are dropped.
    #[test]
    fn denials_partly_refused_by_a_breaker_are_added_once_and_the_call_succeeds() {
        let h = host();
        let (mut a, seen) = second_master_half_open(&h);
        let batch = [(key(1), 5u64), (key(2), 7u64)];
        (&mut a as &mut dyn Store)
            .add_denials(&batch, &mut Counters::default())
            .unwrap();
        assert_eq!(counted(&seen, key(1)), 5);
        assert_eq!(counted(&seen, key(2)), 0, "refused: dropped");
    }

    /// Refused by every breaker they go to, denials are answered the refusal: nothing was
    /// added, and the caller may send them again.
    #[test]
    fn denials_every_breaker_refused_are_answered_the_refusal() {
        let h = host();
        let (mut a, seen) = second_master_half_open(&h);
        let e = (&mut a as &mut dyn Store)
            .add_denials(&[(key(2), 7)], &mut Counters::default())
            .unwrap_err();
        assert!(refused(&e), "{e}");
        assert!(seen.borrow().is_empty());
    }
}
