//! The breaker's record, shared by every worker of a host: a small file next to the host's
//! database (`<db_path>.breaker`), mapped `MAP_SHARED` by each process, so that the host opens
//! its breaker once (50 workers do not each pay the primary's timeout `failures` times) and a
//! half-open breaker lets exactly one probe through per host.
//!
//! **How it is kept consistent.** The rules ([`crate::core::breaker`]) run under an exclusive
//! `flock(2)` on the file: simple to reason about (one writer at a time, a plain read-modify-
//! write of the record), and the kernel releases the lock when its holder dies, even by
//! SIGKILL, so a worker killed mid-transition never wedges the host; one stopped (SIGSTOP)
//! under it costs a waiter [`statefile::LOCK_WAIT`], after which the call asks the primary as
//! if the breaker were closed (its answer, not the breaker, decides). What the lock protects is
//! only microseconds of memory work, never a call to the primary: a probe is a slot in the
//! record with a deadline, not a held lock. The fast path takes no lock: one atomic load of the
//! *gate* word, which every transition rewrites last. 0 means closed (go on); a time in the
//! future means refused until then (open, or a probe in flight); anything else (the time has
//! come, or a value no rule could have written) sends the call to the locked path.
//!
//! **A damaged file is rebuilt.** The record carries a magic number and a checksum written
//! after the fields: a file that is short (extended with zeros), torn (a holder killed while
//! writing) or garbage fails the check under the lock and starts again closed. Opening and
//! mapping happen only when the caller first needs the breaker (never at module startup).
//!
//! **A truncated file costs nothing but the shared state.** Truncated to 0 under running
//! processes, the file's page faults, and the SIGBUS handler ([`super::sigbus`]) gives the
//! process private zeros instead: a gate of 0 (closed), so the call asks the primary, whose
//! answer decides. The next call sees the mapping poisoned and opens the file anew
//! ([`HostBreaker::renew`]), which extends it and rebuilds its record closed. Truncated to a
//! few bytes, the record reads as zeros (rebuilt closed by the checksum) and the short file is
//! noticed on the locked path, as one removed or replaced is, and opened anew.
//!
//! A forked child must open its own [`HostBreaker`] (a `flock` belongs to the open file
//! description, which a child shares with its parent), as the worker does with its store.

use super::statefile::{self, Locked, Mapping, SharedLayout};
use super::StoreError;
use crate::core::breaker::Record;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// "RLBRKR01": this layout.
const MAGIC: u64 = u64::from_le_bytes(*b"RLBRKR01");

/// The file's layout: every word an atomic, since other processes read and write it.
#[repr(C)]
struct Shared {
    magic: AtomicU64,
    /// The fast path's word (see the module doc).
    gate: AtomicI64,
    fields: [AtomicU64; FIELDS],
    /// Checksum of `magic` and `fields`, written after them.
    sum: AtomicU64,
}

const FIELDS: usize = 8;
/// Bytes the file holds.
pub const LEN: usize = std::mem::size_of::<Shared>();

fn encode(r: &Record) -> [u64; FIELDS] {
    [
        u64::from(r.open),
        r.failures,
        r.window_start as u64,
        r.open_until as u64,
        r.probe,
        r.probe_deadline as u64,
        r.probes,
        r.opened,
    ]
}

fn decode(f: &[u64; FIELDS]) -> Option<Record> {
    if f[0] > 1 {
        return None;
    }
    Some(Record {
        open: f[0] == 1,
        failures: f[1],
        window_start: f[2] as i64,
        open_until: f[3] as i64,
        probe: f[4],
        probe_deadline: f[5] as i64,
        probes: f[6],
        opened: f[7],
    })
}

/// FNV-1a over the magic and the fields: enough to tell a torn or garbage record from one we
/// wrote (this guards against accidents, not against someone who may write the file).
fn checksum(fields: &[u64; FIELDS]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in std::iter::once(MAGIC).chain(fields.iter().copied()) {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

// SAFETY: atomics only (see `Shared`): any bytes are a valid value, garbage is caught by the
// checksum, and concurrent use from other processes through their mappings is not a race.
unsafe impl SharedLayout for Shared {}

/// How the file is named in errors.
const NOUN: &str = "breaker file";

/// One process's mapping of the host's breaker file.
pub struct HostBreaker {
    map: Mapping<Shared>,
    /// Records found damaged and rebuilt by this process (for tests and the log).
    rebuilt: u64,
    /// Whether the file was found truncated since the caller last asked ([`Self::take_truncated`]).
    truncated: bool,
}

impl HostBreaker {
    /// Where a host's breaker file lives: next to its database.
    pub fn path_for(db: &Path) -> PathBuf {
        statefile::beside(db, ".breaker")
    }

    /// Opens (creating it, mode 0600) and maps the breaker file at `path` ([`Mapping::open`]:
    /// the trust checks, a file that is not ours refused as `Misconfigured`). A short or
    /// damaged file is rebuilt closed.
    pub fn open(path: &Path) -> Result<HostBreaker, StoreError> {
        let map = Mapping::open(path, NOUN, |_| Ok(()))?;
        let mut hb = HostBreaker {
            map,
            rebuilt: 0,
            truncated: false,
        };
        // Checks the record (rebuilding a damaged one) before anyone relies on the gate.
        hb.record(0)?;
        Ok(hb)
    }

    fn shared(&self) -> &Shared {
        self.map.get()
    }

    /// The fast path's word: 0 closed; otherwise see [`Record::gate`].
    pub fn gate(&self) -> i64 {
        self.shared().gate.load(Ordering::Acquire)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.map.path()
    }

    /// How many damaged records this process rebuilt.
    pub fn rebuilt(&self) -> u64 {
        self.rebuilt
    }

    /// Reads the record under the lock (a damaged one reads as a fresh record), lets `f`
    /// change it with the time `now`, and writes it back with its checksum, the gate last.
    pub fn transition<T>(
        &mut self,
        now: i64,
        f: impl FnOnce(&mut Record) -> T,
    ) -> Result<T, StoreError> {
        self.reopen_if_replaced()?;
        let (out, valid) = {
            let _lock = Locked::take(self.map.file(), self.map.path(), NOUN)?;
            let s = self.shared();
            let fields: [u64; FIELDS] =
                std::array::from_fn(|i| s.fields[i].load(Ordering::Relaxed));
            let valid = s.magic.load(Ordering::Relaxed) == MAGIC
                && s.sum.load(Ordering::Relaxed) == checksum(&fields);
            let mut record = decode(&fields).filter(|_| valid).unwrap_or_default();
            let before = record;
            let out = f(&mut record);
            if record != before || !valid {
                let fields = encode(&record);
                s.magic.store(MAGIC, Ordering::Relaxed);
                for (slot, v) in s.fields.iter().zip(fields) {
                    slot.store(v, Ordering::Relaxed);
                }
                s.sum.store(checksum(&fields), Ordering::Release);
            }
            // Always: this also mends a gate no rule wrote (see the module doc).
            s.gate.store(record.gate(now), Ordering::Release);
            (out, valid)
        };
        self.rebuilt += u64::from(!valid);
        Ok(out)
    }

    /// The record as it is at `now` (a damaged one: rebuilt, closed).
    pub fn record(&mut self, now: i64) -> Result<Record, StoreError> {
        self.transition(now, |r| *r)
    }

    /// Whether a fault (the file truncated under us) replaced the mapping with private zeros:
    /// what this process reads and writes there is its own until [`Self::renew`].
    pub fn poisoned(&self) -> bool {
        self.map.poisoned()
    }

    /// After a fault: opens the file anew (extended, its record rebuilt), so that this process
    /// shares the host's breaker again. Cheap when there was none (one atomic load): for the
    /// start of every call. An error leaves the poisoned mapping, tried again next time.
    pub fn renew(&mut self) -> Result<(), StoreError> {
        if self.map.poisoned() {
            self.reopen()?;
        }
        Ok(())
    }

    /// Whether the file was found truncated (and opened anew) since the last call of this.
    pub fn take_truncated(&mut self) -> bool {
        std::mem::take(&mut self.truncated)
    }

    fn reopen(&mut self) -> Result<(), StoreError> {
        let truncated = self.truncated
            || self.map.poisoned()
            || std::fs::symlink_metadata(self.map.path()).is_ok_and(|m| m.len() < LEN as u64);
        let rebuilt = self.rebuilt;
        *self = HostBreaker::open(self.map.path())?;
        self.rebuilt += rebuilt;
        self.truncated = truncated;
        Ok(())
    }

    /// A file removed, replaced or truncated under us: the host's other processes use the
    /// file at the path, so this one maps it too.
    fn reopen_if_replaced(&mut self) -> Result<(), StoreError> {
        if self.map.poisoned() || !self.map.is_current() {
            self.reopen()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::breaker::{Admit, BreakerState};
    use crate::core::config::BreakerConfig;
    use crate::storage::ErrorKind;
    use std::os::unix::fs::PermissionsExt;

    const CFG: BreakerConfig = BreakerConfig {
        failures: 2,
        window_ms: 1_000,
        retry_ms: 500,
    };

    fn dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn open_it(hb: &mut HostBreaker, now: i64) {
        for _ in 0..2 {
            hb.transition(now, |r| r.failed(&CFG, now, None)).unwrap();
        }
    }

    #[test]
    fn two_handles_on_one_file_share_the_state() {
        let d = dir();
        let p = d.path().join("db.sqlite.breaker");
        let mut a = HostBreaker::open(&p).unwrap();
        let mut b = HostBreaker::open(&p).unwrap();
        assert_eq!(b.gate(), 0, "a fresh file is closed");
        let opened = a.transition(100, |r| r.failed(&CFG, 100, None)).unwrap();
        assert!(!opened);
        let opened = b.transition(101, |r| r.failed(&CFG, 101, None)).unwrap();
        assert!(opened, "b's failure is the second of the host's");
        assert_eq!(a.gate(), 601, "a sees it open until 101 + retry_ms");
        assert_eq!(a.record(0).unwrap().state(&CFG, 300), BreakerState::Open);
    }

    #[test]
    fn only_one_handle_gets_the_probe() {
        let d = dir();
        let p = d.path().join("b");
        let mut a = HostBreaker::open(&p).unwrap();
        let mut b = HostBreaker::open(&p).unwrap();
        open_it(&mut a, 0);
        let pa = a.transition(500, |r| r.admit(&CFG, 500, 50)).unwrap();
        let pb = b.transition(500, |r| r.admit(&CFG, 500, 50)).unwrap();
        assert!(matches!(pa, Admit::Probe(_)));
        assert_eq!(pb, Admit::Refuse);
        assert_eq!(
            b.gate(),
            550,
            "refused on the fast path until the probe's deadline"
        );
    }

    #[test]
    fn a_forked_child_sees_and_changes_the_parents_state() {
        let d = dir();
        let p = d.path().join("b");
        let mut hb = HostBreaker::open(&p).unwrap();
        // SAFETY: the child only runs the breaker's transition on memory already mapped
        // (no allocation, no lock but flock) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = hb.transition(5, |r| r.failed(&CFG, 5, None)).is_ok()
                && matches!(hb.transition(6, |r| r.failed(&CFG, 6, None)), Ok(true));
            // SAFETY: ends the child at once, running no destructor of the parent's state.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(hb.gate(), 506, "opened by the child at 6");
        let reopened = HostBreaker::open(&p).unwrap().record(0).unwrap();
        assert!(reopened.open && reopened.opened == 1);
    }

    #[test]
    fn a_short_file_is_rebuilt_closed() {
        let d = dir();
        let p = d.path().join("b");
        std::fs::write(&p, b"abc").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut hb = HostBreaker::open(&p).unwrap();
        assert_eq!(hb.rebuilt(), 1);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), LEN as u64);
        assert_eq!(hb.record(0).unwrap(), Record::default());
        assert_eq!(hb.rebuilt(), 1, "rebuilt once");
    }

    #[test]
    fn a_garbage_file_is_rebuilt_closed() {
        let d = dir();
        let p = d.path().join("b");
        std::fs::write(&p, [0xa5u8; LEN]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut hb = HostBreaker::open(&p).unwrap();
        assert_eq!(hb.gate(), 0);
        assert!(!hb.record(0).unwrap().open);
    }

    #[test]
    fn a_torn_record_is_rebuilt_closed() {
        let d = dir();
        let p = d.path().join("b");
        let mut hb = HostBreaker::open(&p).unwrap();
        open_it(&mut hb, 0);
        // A writer killed after changing a field and before its checksum.
        hb.shared().fields[1].store(7, Ordering::Relaxed);
        let r = hb.record(0).unwrap();
        assert_eq!(r, Record::default());
        assert_eq!(hb.gate(), 0);
    }

    #[test]
    fn a_gate_no_rule_could_have_written_goes_to_the_locked_path() {
        let d = dir();
        let p = d.path().join("b");
        let mut hb = HostBreaker::open(&p).unwrap();
        hb.shared().gate.store(i64::MAX, Ordering::Relaxed);
        // The caller's fast path sends it here (see storage::breaker); the record is closed.
        let admit = hb.transition(10, |r| r.admit(&CFG, 10, 50)).unwrap();
        assert_eq!(admit, Admit::Pass);
        assert_eq!(hb.gate(), 0);
    }

    #[test]
    fn a_replaced_file_is_opened_anew() {
        let d = dir();
        let p = d.path().join("b");
        let mut a = HostBreaker::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let mut b = HostBreaker::open(&p).unwrap();
        open_it(&mut b, 0);
        assert!(a.record(0).unwrap().open, "a follows the path to b's file");
    }

    fn truncate(p: &Path, len: u64) {
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.set_len(len).unwrap();
    }

    #[test]
    fn a_handle_whose_file_was_truncated_to_zero_reads_closed_and_shares_again_once_renewed() {
        let d = dir();
        let p = d.path().join("b");
        let mut a = HostBreaker::open(&p).unwrap();
        let mut b = HostBreaker::open(&p).unwrap();
        open_it(&mut a, 0);
        assert_ne!(b.gate(), 0);
        truncate(&p, 0);
        assert_eq!(b.gate(), 0, "private zeros: closed");
        assert!(b.poisoned());
        b.renew().unwrap();
        assert!(!b.poisoned() && b.take_truncated());
        assert!(!b.take_truncated(), "told once");
        // a's mapping finds the file b extended again (no fault): both share it.
        open_it(&mut a, 10);
        assert_eq!(b.gate(), a.gate());
        assert!(b.record(10).unwrap().open);
    }

    #[test]
    fn a_file_truncated_to_a_few_bytes_is_rebuilt_closed_and_opened_anew_on_the_locked_path() {
        let d = dir();
        let p = d.path().join("b");
        let mut a = HostBreaker::open(&p).unwrap();
        open_it(&mut a, 0);
        truncate(&p, 8);
        // No fault: the record beyond the 8 bytes is zeros under the mapping.
        assert!(!a.poisoned());
        assert!(!a.record(0).unwrap().open);
        assert!(a.take_truncated());
        assert_eq!(std::fs::metadata(&p).unwrap().len(), LEN as u64);
    }

    #[test]
    fn a_file_that_is_not_ours_is_refused_as_misconfigured() {
        let d = dir();
        let p = d.path().join("b");
        std::fs::write(&p, b"").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = HostBreaker::open(&p).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
        assert!(e.what().contains("writable by"), "{}", e.what());
    }

    #[test]
    fn its_path_is_next_to_the_database() {
        assert_eq!(
            HostBreaker::path_for(Path::new("/var/lib/rl.sqlite")),
            Path::new("/var/lib/rl.sqlite.breaker")
        );
    }
}
