//! The keys a process decides with: the current key file, watched, and during a rotation the
//! previous one. At most once a second a process compares the key file's identity (device,
//! inode, size, mtime) with what it read, and the key recorded in the store with its own (see
//! [`crate::core::keyswitch`]): within a second of the file being replaced, every process of
//! the host decides with the new key, and two configurations with different keys on one store
//! are an error instead of a silent split. Nothing here runs per call but a clock read.

use crate::core::keyswitch::{self, Action, Conflict, Fingerprint, Held, KeyRecord};
use crate::core::subject::{fingerprint, BucketKey, Pseudonym, Pseudonymizer};
use crate::keyfile::{self, KeyError};
use crate::opslog::{Event, OpsLog};
use crate::storage::{Counters, ErrorKind, Store, StoreError, StoreExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the key file and the recorded key are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    /// When the file at the path last changed in any way (a rename in included), ms.
    ctime_ms: i64,
}

fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    // A symbolic link repointed (to a key file made earlier) changed when the link did.
    let link_ctime = std::fs::symlink_metadata(path)
        .map(|l| (l.ctime(), l.ctime_nsec()))
        .unwrap_or((0, 0));
    let (ctime, ctime_nsec) = link_ctime.max((m.ctime(), m.ctime_nsec()));
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ms: ctime.saturating_mul(1_000) + ctime_nsec / 1_000_000,
    })
}

/// Which host this is, to tell apart two hosts or containers whose key files share a path: its
/// host name (its UTS namespace's: a container's own) and its kernel's boot id (two machines
/// cloned with one host name differ there; the containers of one kernel share it).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into a buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = if rc == 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!(
        "{name} (boot {})",
        boot.trim().get(..8).unwrap_or("unknown")
    )
}

struct Key {
    pseudonymizer: Pseudonymizer,
    fingerprint: Fingerprint,
}

impl Key {
    fn new(bytes: &[u8]) -> Self {
        Self {
            pseudonymizer: Pseudonymizer::new(bytes),
            fingerprint: fingerprint(bytes),
        }
    }
}

pub struct KeyRing {
    path: PathBuf,
    /// The default key file, created when missing.
    create: bool,
    current: Key,
    identity: Option<FileId>,
    previous: Option<(PathBuf, Key)>,
    checked_at: Option<Instant>,
    host: String,
    /// When the key held was first recorded, once settled with the store (see keyswitch).
    settled_since: Option<i64>,
    /// The key held before this process saw its key file change, until the new one is settled.
    replaced: Option<Fingerprint>,
    /// `ratelimit.key_fingerprint`: the only key this process may hold.
    pinned: Option<[u8; 8]>,
    /// The host's note of the key it settled with the store (see [`Self::noting_settled`]),
    /// and what this process last wrote or read there.
    settled_note: Option<PathBuf>,
    noted: Option<(Fingerprint, i64)>,
}

fn key_error(e: KeyError) -> StoreError {
    StoreError::new(
        ErrorKind::Misconfigured,
        e.to_string().trim_start_matches("ratelimit: ").to_string(),
    )
}

impl KeyRing {
    /// Reads the key file (creating the default one) and the previous key file, if any.
    pub fn load(path: &Path, create: bool, previous: Option<&Path>) -> Result<Self, KeyError> {
        let identity = file_id(path);
        let current = Key::new(&keyfile::load(path, create)?);
        let previous = match previous {
            Some(p) => Some((p.to_owned(), Key::new(&keyfile::load(p, false)?))),
            None => None,
        };
        Ok(Self {
            path: path.to_owned(),
            create,
            current,
            identity,
            previous,
            checked_at: None,
            host: host_name(),
            settled_since: None,
            replaced: None,
            pinned: None,
            settled_note: None,
            noted: None,
        })
    }

    /// Keeps the key settled with the store in the host's file at `path` (beside the
    /// database): a fresh worker (a respawn) whose store cannot be asked now, and whose key is
    /// the one the host settled, decides with it instead of answering "unavailable" (on a
    /// Cluster, the master holding the record may hang while the others answer). A worker whose
    /// key differs still needs the store.
    pub fn noting_settled(mut self, path: PathBuf) -> Self {
        self.settled_note = Some(path);
        self
    }

    /// Writes the settled key to the host's note, when it is not what the note says already.
    /// Best effort: a note that cannot be written costs a fresh worker its fallback, no more.
    fn note_settled(&mut self) {
        let (Some(path), Some(since)) = (&self.settled_note, self.settled_since) else {
            return;
        };
        let now = (self.current.fingerprint, since);
        if self.noted == Some(now) {
            return;
        }
        let text = format!("{} {since}\n", keyswitch::hex(&now.0));
        let tmp = {
            let mut t = path.clone().into_os_string();
            t.push(format!(".{}", std::process::id()));
            PathBuf::from(t)
        };
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_ok() {
            self.noted = Some(now);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// The key the host's note says was settled, and since when; None without a note that is
    /// ours (a regular file of this user, not a link) and reads as one.
    fn read_note(&self) -> Option<(Fingerprint, i64)> {
        let path = self.settled_note.as_ref()?;
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.file_type().is_file() || meta.uid() != crate::trust::euid() || meta.len() > 128 {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        let (fp, since) = text.trim_end().split_once(' ')?;
        Some((keyswitch::unhex(fp)?, since.parse().ok()?))
    }

    /// Refuses any key but the one `pin` names (`ratelimit.key_fingerprint`), now and whenever
    /// the key file is read again: even a host with no store to compare with holds the right key.
    pub fn pinned(mut self, pin: Option<[u8; 8]>) -> Result<Self, KeyError> {
        self.pinned = pin;
        check_pin(&self.path, &self.current.fingerprint, pin)?;
        Ok(self)
    }

    /// A ring of one key, for tests and tools.
    pub fn of(key: &[u8]) -> Self {
        Self {
            path: PathBuf::new(),
            create: false,
            current: Key::new(key),
            identity: None,
            previous: None,
            checked_at: Some(Instant::now() + Duration::from_secs(1 << 30)),
            host: String::new(),
            settled_since: None,
            replaced: None,
            pinned: None,
            settled_note: None,
            noted: None,
        }
    }

    /// Where `subject` (normalised) in `scope` lives, with its previous name during a rotation.
    pub fn key(&self, scope: &[u8], subject: &[u8]) -> BucketKey {
        let mut k = self.current.pseudonymizer.key(scope, subject);
        k.previous = self
            .previous
            .as_ref()
            .map(|(_, p)| p.pseudonymizer.pseudonym(scope, subject));
        k
    }

    /// The name a request id of `subject` (normalised) in `scope` is remembered under, with the
    /// current key (a rotation forgets remembered answers: a retry across it is decided afresh).
    pub fn request(&self, scope: &[u8], subject: &[u8], id: &[u8]) -> Pseudonym {
        self.current.pseudonymizer.request(scope, subject, id)
    }

    /// At most once per [`CHECK_EVERY`]: re-reads a replaced key file, and settles with the
    /// store which key is in use.
    pub fn check(
        &mut self,
        store: &mut dyn Store,
        carry: &mut Counters,
        log: &OpsLog,
    ) -> Result<(), StoreError> {
        if self.checked_at.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
            return Ok(());
        }
        let replaced = self.identity != file_id(&self.path);
        if replaced {
            self.reread(log)?;
        }
        let place = self.path.display().to_string();
        let mut reread = false;
        for attempt in 0.. {
            if attempt == 8 {
                // Other processes keep recording other keys: no decision until that settles.
                return Err(StoreError::new(
                    ErrorKind::Busy,
                    "the database's key record keeps changing",
                ));
            }
            let recorded = match store.key_record(carry) {
                Ok(r) => r,
                // The key the last check settled with the store, its file unchanged since, stays
                // in use while the store cannot be asked: on a Cluster the master holding the
                // record may hang while the others answer, and its subjects only need be
                // "unavailable". Asked again a check later.
                Err(e) if e.is_transient() && self.checked_at.is_some() && !replaced => {
                    self.checked_at = Some(Instant::now());
                    return Ok(());
                }
                // A fresh worker: the key its host settled, if it is the one it holds.
                Err(e) if e.is_transient() && self.checked_at.is_none() && !replaced => {
                    match self.read_note() {
                        Some((fp, since)) if fp == self.current.fingerprint => {
                            self.settled_since = Some(since);
                            self.noted = Some((fp, since));
                            self.checked_at = Some(Instant::now());
                            return Ok(());
                        }
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            let held = Held {
                fingerprint: &self.current.fingerprint,
                path: &place,
                host: &self.host,
                previous: self.previous.as_ref().map(|(_, k)| &k.fingerprint),
                replaced: self.replaced.as_ref(),
                settled_since: self.settled_since,
                file_changed_ms: self.identity.map(|f| f.ctime_ms),
                reread,
            };
            match keyswitch::resolve(held, recorded.as_ref()) {
                Action::Keep => {
                    let since = recorded.map_or(0, |r| r.since_ms);
                    self.settled_since = Some(since);
                    self.replaced = None;
                    break;
                }
                Action::Reread => {
                    self.reread(log)?;
                    reread = true;
                }
                Action::Record { previous, since_ms } => {
                    let new = KeyRecord {
                        fingerprint: self.current.fingerprint,
                        path: place.clone(),
                        host: self.host.clone(),
                        previous,
                        since_ms,
                    };
                    let expected = recorded.as_ref().map(|r| r.fingerprint);
                    if store.record_key(&new, expected.as_ref(), carry)? {
                        match (&recorded, previous) {
                            (Some(_), Some(_)) => log.note(Event::KeyChanged, &place),
                            // Over a younger key (a stray host's, into a store that had lost
                            // ours): worth a line. Into an empty store (a local fallback's
                            // first use, a flushed Redis) it is routine.
                            (Some(_), None) => log.note(Event::KeyRestored, &place),
                            _ => {}
                        }
                        self.settled_since = match since_ms {
                            // Stamped by the store: read back what it wrote (a failure only
                            // delays settling to the next check).
                            keyswitch::STAMP_NOW => store
                                .key_record(carry)
                                .ok()
                                .flatten()
                                .filter(|r| r.fingerprint == self.current.fingerprint)
                                .map(|r| r.since_ms),
                            s => Some(s),
                        };
                        self.replaced = None;
                        break;
                    }
                    // Someone recorded another key meanwhile: look again.
                }
                Action::Conflict(c) => {
                    let rec = recorded.expect("a conflict is with a recorded key");
                    return Err(StoreError::new(
                        ErrorKind::Misconfigured,
                        conflict_text(c, &place, &self.host, &self.current.fingerprint, &rec),
                    ));
                }
            }
        }
        if let Some((p, _)) = &self.previous {
            log.note(Event::KeysMigrating, &p.display().to_string());
        }
        self.note_settled();
        self.checked_at = Some(Instant::now());
        Ok(())
    }

    fn reread(&mut self, log: &OpsLog) -> Result<(), StoreError> {
        let identity = file_id(&self.path);
        let key = Key::new(&keyfile::load(&self.path, self.create).map_err(key_error)?);
        check_pin(&self.path, &key.fingerprint, self.pinned).map_err(key_error)?;
        if key.fingerprint != self.current.fingerprint {
            log.note(Event::KeyChanged, &self.path.display().to_string());
            // The key held until now is what the new one replaces (see keyswitch), and the new
            // one is not settled with the store yet.
            if self.replaced.is_none() {
                self.replaced = Some(self.current.fingerprint);
            }
            self.settled_since = None;
        }
        self.current = key;
        self.identity = identity;
        Ok(())
    }
}

fn check_pin(path: &Path, fp: &Fingerprint, pin: Option<[u8; 8]>) -> Result<(), KeyError> {
    match pin {
        Some(p) if fp[..8] != p => Err(KeyError::Unpinned {
            path: path.to_owned(),
            found: keyswitch::short(fp),
            pinned: p.iter().map(|b| format!("{b:02x}")).collect(),
        }),
        _ => Ok(()),
    }
}

/// The fingerprint of the key in `path` as operators compare them (phpinfo's "Key
/// fingerprint", the value of `ratelimit.key_fingerprint`).
pub fn short_fingerprint(path: &Path) -> Result<String, KeyError> {
    Ok(keyswitch::short(&fingerprint(&keyfile::load(path, false)?)))
}

/// Why a key on record is refused, naming both key files and hosts and both keys' fingerprints
/// (never a key, nor a subject), and what the operator can do.
fn conflict_text(
    c: Conflict,
    place: &str,
    host: &str,
    ours: &Fingerprint,
    rec: &KeyRecord,
) -> String {
    let (theirs, mine) = (keyswitch::short(&rec.fingerprint), keyswitch::short(ours));
    // What another host wrote (or anyone with write access to the store): quoted, escaped, cut.
    let cut = |s: &str| format!("{:?}", s.chars().take(200).collect::<String>());
    let recorded = format!(
        "key {theirs} of key file {} on host {}",
        cut(&rec.path),
        cut(&rec.host)
    );
    match c {
        Conflict::Superseded => format!(
            "key file {place} on host {host:?} holds key {mine}, which {recorded} replaced: \
             give this host the new key (the same key on every host and container)"
        ),
        Conflict::Foreign => format!(
            "key file {place} on host {host:?} holds key {mine}, but this store's limits are kept \
             under {recorded}: two configurations with different keys share one store (also at \
             one path, on two hosts or containers); give them the same key, \
             ratelimit.key_file_previous for a rotation, or separate stores"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fake::Fake;

    /// A ring whose key file is in a directory of its own, and a fake store to check it with.
    struct Setup {
        dir: tempfile::TempDir,
        ring: KeyRing,
        fake: Fake,
        store: Box<dyn Store>,
    }

    impl Setup {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let ring = KeyRing::load(&dir.path().join("key"), true, None).unwrap();
            // The host's clock: records are stamped with it, and compared with file times.
            let fake = Fake::new(crate::storage::system_clock());
            let store = fake.boxed();
            Setup {
                dir,
                ring,
                fake,
                store,
            }
        }

        /// After a first check that settled the key.
        fn settled() -> Self {
            let mut t = Self::new();
            t.check().unwrap();
            t
        }

        fn check(&mut self) -> Result<(), StoreError> {
            self.ring.check(
                self.store.as_mut(),
                &mut Counters::default(),
                &OpsLog::none(),
            )
        }

        /// The next check asks the store, which fails with `kind`.
        fn recheck_failing(&mut self, kind: ErrorKind) -> Result<(), StoreError> {
            self.ring.checked_at = Some(Instant::now() - CHECK_EVERY);
            self.fake.fail(Some(kind));
            self.check()
        }
    }

    /// Writes a new random key over `path` (a rename, as a rotation tool does).
    fn replace_key(path: &Path) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, rand::random::<[u8; 32]>()).unwrap();
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    /// Another process's ring on the same store, of `host`, with its own key file at `path`.
    fn other_ring(path: &Path, host: &str) -> KeyRing {
        let mut r = KeyRing::load(path, true, None).unwrap();
        r.host = host.into();
        r
    }

    fn due(ring: &mut KeyRing) {
        ring.checked_at = Some(Instant::now() - CHECK_EVERY);
    }

    /// A respawned worker whose store cannot be asked now decides with the key its host
    /// settled, when it holds that key; with another key, or without the host's note, it waits
    /// for the store.
    #[test]
    fn a_fresh_worker_with_the_hosts_settled_key_decides_while_the_store_cannot_be_asked() {
        let mut t = Setup::new();
        let note = t.dir.path().join("db.sqlite.key-settled");
        t.ring = KeyRing::load(&t.dir.path().join("key"), true, None)
            .unwrap()
            .noting_settled(note.clone());
        t.check().unwrap();
        assert!(note.exists(), "the settled key noted for the host");
        t.fake.fail(Some(ErrorKind::Timeout));
        let fresh = || KeyRing::load(&t.dir.path().join("key"), false, None).unwrap();
        let mut c = Counters::default();
        let mut noted = fresh().noting_settled(note.clone());
        noted
            .check(t.store.as_mut(), &mut c, &OpsLog::none())
            .unwrap();
        assert_eq!(noted.settled_since, t.ring.settled_since);
        let mut unnoted = fresh();
        let e = unnoted.check(t.store.as_mut(), &mut c, &OpsLog::none());
        assert_eq!(
            e.unwrap_err().kind(),
            ErrorKind::Timeout,
            "no note: the store decides"
        );
        let elsewhere = tempfile::tempdir().unwrap();
        let mut other = KeyRing::load(&elsewhere.path().join("key"), true, None)
            .unwrap()
            .noting_settled(note.clone());
        let e = other.check(t.store.as_mut(), &mut c, &OpsLog::none());
        assert_eq!(
            e.unwrap_err().kind(),
            ErrorKind::Timeout,
            "another key: the store decides"
        );
        std::fs::write(&note, "not a note\n").unwrap();
        let mut garbled = fresh().noting_settled(note);
        let e = garbled.check(t.store.as_mut(), &mut c, &OpsLog::none());
        assert_eq!(
            e.unwrap_err().kind(),
            ErrorKind::Timeout,
            "a note that does not read"
        );
    }

    #[test]
    fn another_host_with_another_key_at_the_same_path_is_refused() {
        let mut t = Setup::settled();
        // Another container: the same path in its own file system, a key of its own.
        let elsewhere = tempfile::tempdir().unwrap();
        let its_path = elsewhere.path().join("key");
        let mut other = other_ring(&its_path, "container-2");
        // Both at one path: the record names the other's path (one file system cannot).
        t.fake.0.borrow_mut().key.as_mut().unwrap().path = its_path.display().to_string();
        let mut store = t.fake.boxed();
        let e = other
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
        assert!(e.what().contains("container-2"), "{}", e.what());
        // The first keeps its key: nothing was recorded over it.
        due(&mut t.ring);
        t.check().unwrap();
        assert_eq!(
            t.fake.0.borrow().key.as_ref().unwrap().fingerprint,
            t.ring.current.fingerprint
        );
    }

    #[test]
    fn a_key_file_this_process_saw_replaced_is_recorded_as_replacing_the_old() {
        let mut t = Setup::settled();
        let old = t.ring.current.fingerprint;
        replace_key(&t.dir.path().join("key"));
        due(&mut t.ring);
        t.check().unwrap();
        let rec = t.fake.0.borrow().key.clone().unwrap();
        assert_eq!(
            (rec.fingerprint, rec.previous),
            (t.ring.current.fingerprint, Some(old))
        );
    }

    #[test]
    fn a_process_started_after_its_hosts_key_file_was_replaced_records_the_new_key() {
        let mut t = Setup::settled();
        std::thread::sleep(Duration::from_millis(20));
        replace_key(&t.dir.path().join("key"));
        // A respawned worker, which never held the old key.
        let mut fresh = KeyRing::load(&t.dir.path().join("key"), true, None).unwrap();
        fresh.host = t.ring.host.clone();
        let mut store = t.fake.boxed();
        fresh
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        // The old process, told its key was replaced, reads its file again and agrees.
        due(&mut t.ring);
        t.check().unwrap();
        assert_eq!(t.ring.current.fingerprint, fresh.current.fingerprint);
    }

    #[test]
    fn a_process_holding_a_replaced_key_is_refused_not_recording_it_back() {
        let mut t = Setup::settled();
        // Another host, whose key file (at another path) was replaced under its processes.
        let elsewhere = tempfile::tempdir().unwrap();
        let its_path = elsewhere.path().join("key");
        std::fs::copy(t.dir.path().join("key"), &its_path).unwrap();
        let mut other = other_ring(&its_path, "host-2");
        let mut store = t.fake.boxed();
        other
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        replace_key(&its_path);
        due(&mut other);
        other
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        due(&mut t.ring);
        let e = t.check().unwrap_err();
        assert!(e.what().contains("replaced"), "{}", e.what());
        assert_eq!(
            t.fake.0.borrow().key.as_ref().unwrap().fingerprint,
            other.current.fingerprint
        );
    }

    #[test]
    fn a_settled_key_is_recorded_again_over_a_stray_after_the_store_lost_it() {
        let mut t = Setup::settled();
        let ours = t.ring.current.fingerprint;
        let elsewhere = tempfile::tempdir().unwrap();
        let mut stray = other_ring(&elsewhere.path().join("stray"), "stray-host");
        let mut store = t.fake.boxed();
        assert!(stray
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .is_err());
        // FLUSHALL, and the stray's next call comes first.
        std::thread::sleep(Duration::from_millis(5));
        t.fake.0.borrow_mut().key = None;
        due(&mut stray);
        stray
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        due(&mut t.ring);
        t.check().unwrap();
        assert_eq!(t.fake.0.borrow().key.as_ref().unwrap().fingerprint, ours);
        due(&mut stray);
        let e = stray
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
        // And it stays so: the settled ring keeps its key.
        due(&mut t.ring);
        t.check().unwrap();
        assert_eq!(t.fake.0.borrow().key.as_ref().unwrap().fingerprint, ours);
    }

    #[test]
    fn a_pinned_fingerprint_refuses_any_other_key_now_and_after_a_replacement() {
        let t = Setup::new();
        let path = t.dir.path().join("key");
        let fp = t.ring.current.fingerprint;
        let mut pin = [0u8; 8];
        pin.copy_from_slice(&fp[..8]);
        let mut ring = KeyRing::load(&path, false, None)
            .unwrap()
            .pinned(Some(pin))
            .unwrap();
        let mut other = pin;
        other[0] ^= 1;
        let e = KeyRing::load(&path, false, None)
            .unwrap()
            .pinned(Some(other))
            .err()
            .unwrap();
        assert!(e.to_string().contains("ratelimit.key_fingerprint"), "{e}");
        assert_eq!(short_fingerprint(&path).unwrap(), keyswitch::short(&fp));
        // The file replaced with another key: the next check refuses it.
        replace_key(&path);
        let mut store = t.fake.boxed();
        ring.checked_at = None;
        let e = ring
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
        assert!(e.what().contains("pins"), "{}", e.what());
    }

    #[test]
    fn a_symbolic_link_repointed_to_an_older_key_file_is_a_replacement_on_this_host() {
        let t = Setup::new();
        let older = t.dir.path().join("older.key");
        std::fs::write(&older, rand::random::<[u8; 32]>()).unwrap();
        std::fs::set_permissions(&older, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // The key file is a link; its first target is recorded after `older` was made.
        let first = t.dir.path().join("first.key");
        std::fs::rename(t.dir.path().join("key"), &first).unwrap();
        let link = t.dir.path().join("link");
        std::os::unix::fs::symlink(&first, &link).unwrap();
        let mut store = t.fake.boxed();
        let mut ring = KeyRing::load(&link, false, None).unwrap();
        ring.check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // `ln -sfn older.key link`, then the pool restarted: no process saw the change.
        let tmp = t.dir.path().join("link.tmp");
        std::os::unix::fs::symlink(&older, &tmp).unwrap();
        std::fs::rename(&tmp, &link).unwrap();
        let mut fresh = KeyRing::load(&link, false, None).unwrap();
        fresh
            .check(store.as_mut(), &mut Counters::default(), &OpsLog::none())
            .unwrap();
        assert_eq!(
            t.fake.0.borrow().key.as_ref().unwrap().fingerprint,
            fresh.current.fingerprint
        );
    }

    #[test]
    fn the_host_is_named_with_its_kernels_boot() {
        let h = host_name();
        assert!(h.contains(" (boot ") && h.ends_with(')'), "{h}");
    }

    #[test]
    fn a_settled_key_stays_in_use_while_the_store_cannot_be_asked() {
        let mut t = Setup::settled();
        let before = t.fake.calls();
        t.recheck_failing(ErrorKind::Timeout).unwrap();
        assert_eq!(t.fake.calls(), before + 1, "one attempt");
        // Not asked again before a check's interval.
        t.check().unwrap();
        assert_eq!(t.fake.calls(), before + 1);
    }

    #[test]
    fn a_first_check_the_store_cannot_answer_fails_the_call() {
        let mut t = Setup::new();
        t.fake.fail(Some(ErrorKind::Timeout));
        assert_eq!(t.check().unwrap_err().kind(), ErrorKind::Timeout);
    }

    #[test]
    fn a_replaced_key_file_is_not_used_before_the_store_settles_it() {
        let mut t = Setup::settled();
        let other = t.dir.path().join("other");
        std::fs::write(&other, (1..=32u8).collect::<Vec<u8>>()).unwrap();
        std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::rename(&other, t.dir.path().join("key")).unwrap();
        let e = t.recheck_failing(ErrorKind::Timeout).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
    }

    #[test]
    fn a_store_that_is_not_transiently_failing_fails_the_recheck() {
        let mut t = Setup::settled();
        let e = t.recheck_failing(ErrorKind::Misconfigured).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
    }
}
