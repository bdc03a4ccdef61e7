//! The keys a process decides with: the current key file, watched, and during a rotation the
//! previous one. At most once a second a process compares the key file's identity (device,
//! inode, size, mtime) with what it read, and the key recorded in the store with its own (see
//! [`crate::core::keyswitch`]): within a second of the file being replaced, every process of
//! the host decides with the new key, and two configurations with different keys on one store
//! are an error instead of a silent split. Nothing here runs per call but a clock read.

use crate::core::keyswitch::{self, Action, Fingerprint, Held, KeyRecord};
use crate::core::subject::{fingerprint, BucketKey, Pseudonym, Pseudonymizer};
use crate::keyfile::{self, KeyError};
use crate::opslog::{Event, OpsLog};
use crate::storage::{ErrorKind, Store, StoreError};
use std::os::unix::fs::MetadataExt;
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
}

fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
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
        })
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
    pub fn check(&mut self, store: &mut dyn Store, log: &OpsLog) -> Result<(), StoreError> {
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
            let recorded = match store.key_record() {
                Ok(r) => r,
                // The key the last check settled with the store, its file unchanged since, stays
                // in use while the store cannot be asked: on a Cluster the master holding the
                // record may hang while the others answer, and its subjects only need be
                // "unavailable". Asked again a check later.
                Err(e) if e.is_transient() && self.checked_at.is_some() && !replaced => {
                    self.checked_at = Some(Instant::now());
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let held = Held {
                fingerprint: &self.current.fingerprint,
                path: &place,
                previous: self.previous.as_ref().map(|(_, k)| &k.fingerprint),
                reread,
            };
            match keyswitch::resolve(held, recorded.as_ref()) {
                Action::Keep => break,
                Action::Reread => {
                    self.reread(log)?;
                    reread = true;
                }
                Action::Record => {
                    let new = KeyRecord {
                        fingerprint: self.current.fingerprint,
                        path: place.clone(),
                    };
                    let expected = recorded.as_ref().map(|r| r.fingerprint);
                    if store.record_key(&new, expected.as_ref())? {
                        if recorded.is_some() {
                            log.note(Event::KeyChanged, &place);
                        }
                        break;
                    }
                    // Someone recorded another key meanwhile: look again.
                }
                Action::Conflict => {
                    let other = recorded.map(|r| r.path).unwrap_or_default();
                    return Err(StoreError::new(
                        ErrorKind::Misconfigured,
                        format!(
                            "key file {place} does not hold the key this database's limits are kept under, \
                             recorded by key file {other}: two configurations with different keys share one \
                             database; give them the same key file (or ratelimit.key_file_previous for a \
                             rotation), or separate databases"
                        ),
                    ));
                }
            }
        }
        if let Some((p, _)) = &self.previous {
            log.note(Event::KeysMigrating, &p.display().to_string());
        }
        self.checked_at = Some(Instant::now());
        Ok(())
    }

    fn reread(&mut self, log: &OpsLog) -> Result<(), StoreError> {
        let identity = file_id(&self.path);
        let key = Key::new(&keyfile::load(&self.path, self.create).map_err(key_error)?);
        if key.fingerprint != self.current.fingerprint {
            log.note(Event::KeyChanged, &self.path.display().to_string());
        }
        self.current = key;
        self.identity = identity;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fake::{Fake, Manual};

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
            let fake = Fake::new(Manual::at(0).clock());
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
            self.ring.check(self.store.as_mut(), &OpsLog::none())
        }

        /// The next check asks the store, which fails with `kind`.
        fn recheck_failing(&mut self, kind: ErrorKind) -> Result<(), StoreError> {
            self.ring.checked_at = Some(Instant::now() - CHECK_EVERY);
            self.fake.fail(Some(kind));
            self.check()
        }
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
