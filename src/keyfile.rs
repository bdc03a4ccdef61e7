//! The HMAC key every worker of a host shares. It is read from a file, never from php.ini
//! (every ini value shows in `ini_get()` and `phpinfo()`). The default file, next to the
//! database, is created on first use; workers racing to create it all end with one key,
//! because each writes a private temporary file and publishes it with `link(2)`, which fails
//! if the name exists.
//!
//! A key is used only when it is ours (see [`crate::trust`]): a regular file owned by the
//! effective user or root with no access for group or others, and with enough variety (a key
//! of 32 zero bytes is one anybody can guess). Checked each time the key is read, which is
//! once per worker, never per call.

use crate::core::subject::MIN_KEY_LEN;
use crate::trust::{self, Untrusted};
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `Weak`: too little variety to be secret (see [`weakness`]); `Untrusted`: not ours, or open
/// to others (see [`crate::trust::judge_key`]).
#[derive(Debug)]
pub enum KeyError {
    Missing {
        path: PathBuf,
    },
    TooShort {
        path: PathBuf,
        len: usize,
    },
    Weak {
        path: PathBuf,
        why: String,
    },
    Untrusted(Untrusted),
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// A key other than the one `ratelimit.key_fingerprint` pins (short fingerprints, hex).
    Unpinned {
        path: PathBuf,
        found: String,
        pinned: String,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Missing { path } => {
                write!(f, "ratelimit: key file {} does not exist", path.display())
            }
            KeyError::TooShort { path, len } => write!(
                f,
                "ratelimit: key file {} holds {len} bytes, at least {MIN_KEY_LEN} are needed",
                path.display()
            ),
            KeyError::Weak { path, why } => write!(
                f,
                "ratelimit: key file {} holds a weak key: {why}; make one with \
                 head -c 32 /dev/urandom",
                path.display()
            ),
            KeyError::Untrusted(u) => u.fmt(f),
            KeyError::Io { path, source } => {
                write!(f, "ratelimit: key file {}: {source}", path.display())
            }
            KeyError::Unpinned {
                path,
                found,
                pinned,
            } => write!(
                f,
                "ratelimit: key file {} holds key {found}, not key {pinned} that \
                 ratelimit.key_fingerprint pins",
                path.display()
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Variety a key must have, in bits: `len * log2(distinct byte values)`, an upper bound on
/// what the key can hold. 32 bytes need 16 distinct values (a random 32-byte key has fewer
/// with probability about 3e-17); a 64-character hex key has plenty.
pub const MIN_VARIETY_BITS: f64 = 128.0;

/// Why `key` is too guessable to be a secret, or None: all bytes equal, too few distinct byte
/// values for its length (see [`MIN_VARIETY_BITS`]), or one short block repeated.
pub fn weakness(key: &[u8]) -> Option<String> {
    let mut seen = [false; 256];
    for &b in key {
        seen[b as usize] = true;
    }
    let distinct = seen.iter().filter(|&&s| s).count();
    let bits = key.len() as f64 * (distinct as f64).log2();
    if distinct <= 1 {
        return Some(format!("all {} bytes are equal", key.len()));
    }
    if bits < MIN_VARIETY_BITS {
        return Some(format!(
            "{distinct} distinct byte values in {} bytes (at most {} bits of variety, at least \
             {MIN_VARIETY_BITS} wanted)",
            key.len(),
            bits.floor()
        ));
    }
    let period = smallest_period(key);
    if period <= key.len() / 2 {
        return Some(format!(
            "its {} bytes repeat a block of {period}",
            key.len()
        ));
    }
    None
}

/// The smallest p such that key[i] == key[i + p] for every i (Knuth-Morris-Pratt).
fn smallest_period(key: &[u8]) -> usize {
    if key.is_empty() {
        return 0;
    }
    let mut fail = vec![0usize; key.len()];
    let mut k = 0;
    for i in 1..key.len() {
        while k > 0 && key[i] != key[k] {
            k = fail[k - 1];
        }
        if key[i] == key[k] {
            k += 1;
        }
        fail[i] = k;
    }
    key.len() - fail[key.len() - 1]
}

/// Reads the key at `path`; when `create` is set and the file is missing, creates it first
/// with 32 random bytes, mode 0600. `create` marks the default key, which is never followed
/// through a symbolic link; a configured `ratelimit.key_file` may be a link on purpose.
pub fn load(path: &Path, create: bool) -> Result<Vec<u8>, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let link_allowed = !create;
    let opened = match trust::check_key_file(path, link_allowed) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            trust::check_new_file_dir(path).map_err(KeyError::Untrusted)?;
            publish_new_key(path).map_err(io)?;
            trust::check_key_file(path, link_allowed).map_err(io)?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(KeyError::Missing {
                path: path.to_owned(),
            })
        }
        other => other.map_err(io)?,
    };
    let mut key = Vec::new();
    if let Some(mut f) = opened.file {
        match opened.verdict {
            // Read a refused file only far enough to say whether it is also weak.
            Err(_) => (&mut f).take(4096).read_to_end(&mut key),
            Ok(()) => f.read_to_end(&mut key),
        }
        .map_err(io)?;
    }
    if let Err(mut what) = opened.verdict {
        if let Some(why) = weakness(&key).filter(|_| key.len() >= MIN_KEY_LEN) {
            what.push_str(&format!("; and it holds a weak key: {why}"));
        }
        return Err(KeyError::Untrusted(Untrusted {
            path: path.to_owned(),
            what,
        }));
    }
    if key.len() < MIN_KEY_LEN {
        return Err(KeyError::TooShort {
            path: path.to_owned(),
            len: key.len(),
        });
    }
    if let Some(why) = weakness(&key) {
        return Err(KeyError::Weak {
            path: path.to_owned(),
            why,
        });
    }
    Ok(key)
}

fn publish_new_key(path: &Path) -> io::Result<()> {
    let mut key = [0u8; 32];
    // A weak draw has a probability of about 3e-17; draw again rather than refuse our own key.
    while {
        rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut key)
            .map_err(io::Error::other)?;
        weakness(&key).is_some()
    } {}
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".tmp.{}.{:016x}",
        std::process::id(),
        u64::from_le_bytes(key[..8].try_into().unwrap())
    ));
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The mode must not depend on the umask.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(&key)?;
        f.sync_all()?;
        match fs::hard_link(&tmp, path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()), // published, or another worker won the race: use theirs
        }
    })();
    let _ = fs::remove_file(&tmp);
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_default_key_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.key");
        let first = load(&path, true).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load(&path, true).unwrap(), first);
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left behind"
        );
    }

    #[test]
    fn racing_creators_end_with_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.key");
        let keys: Vec<Vec<u8>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load(&path, true).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| k == &keys[0]));
    }

    #[test]
    fn a_missing_configured_key_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.key");
        assert!(matches!(load(&path, false), Err(KeyError::Missing { .. })));
        assert!(!path.exists());
    }

    #[test]
    fn a_short_key_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.key");
        fs::write(&path, [1u8; 31]).unwrap();
        set_mode(&path, 0o600);
        let err = load(&path, true).unwrap_err();
        assert!(matches!(err, KeyError::TooShort { len: 31, .. }));
        assert!(err.to_string().contains(path.to_str().unwrap()));
    }

    fn set_mode(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn random_key() -> Vec<u8> {
        let mut k = vec![0u8; 32];
        rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut k).unwrap();
        k
    }

    #[test]
    fn weak_keys() {
        assert_eq!(weakness(&[0u8; 32]).unwrap(), "all 32 bytes are equal");
        // 15 distinct values in 32 bytes: weak; 16: enough.
        let k15: Vec<u8> = (0..32u8).map(|i| i % 15).collect();
        let w = weakness(&k15).unwrap();
        assert!(
            w.starts_with("15 distinct byte values in 32 bytes (at most 125 bits"),
            "{w}"
        );
        let k16: Vec<u8> = (0..32u8).map(|i| (i * 7) % 16).chain([1]).collect();
        assert_eq!(
            weakness(&k16[..32]),
            Some("its 32 bytes repeat a block of 16".into())
        );
        let mut k16b = k16[..32].to_vec();
        k16b.swap(0, 1);
        assert_eq!(weakness(&k16b), None, "16 distinct, not a repetition");
        // The published test vectors' key 00 01 .. 1f is fine, so is a 64-character hex key.
        assert_eq!(weakness(&(0..32u8).collect::<Vec<_>>()), None);
        let hex: Vec<u8> = random_key()
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect();
        assert_eq!(weakness(&hex), None);
        // A long key of two values is still weak when it repeats.
        assert!(weakness(&b"ab".repeat(200))
            .unwrap()
            .contains("repeat a block of 2"));
        for _ in 0..1000 {
            assert_eq!(weakness(&random_key()), None);
        }
    }

    #[test]
    fn a_weak_key_is_refused_naming_the_path_never_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zero.key");
        fs::write(&path, [0u8; 32]).unwrap();
        set_mode(&path, 0o600);
        let err = load(&path, false).unwrap_err();
        assert!(matches!(err, KeyError::Weak { .. }), "{err}");
        let s = err.to_string();
        assert!(
            s.contains(path.to_str().unwrap()) && s.contains("all 32 bytes are equal"),
            "{s}"
        );
    }

    #[test]
    fn a_key_open_to_others_is_refused_with_the_mode_found_and_wanted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        fs::write(&path, random_key()).unwrap();
        for mode in [0o640, 0o604, 0o644, 0o620, 0o602, 0o666] {
            set_mode(&path, mode);
            let err = load(&path, false).unwrap_err();
            let s = err.to_string();
            assert!(matches!(err, KeyError::Untrusted(_)), "{s}");
            assert!(
                s.contains(&format!("mode {mode:04o}")) && s.contains("wanted 0600 or stricter"),
                "{s}"
            );
            assert!(s.contains(path.to_str().unwrap()), "{s}");
        }
        for mode in [0o600, 0o400] {
            set_mode(&path, mode);
            assert_eq!(load(&path, false).unwrap().len(), 32);
        }
        // A refused key that is also weak says both.
        fs::write(&path, [0u8; 32]).unwrap();
        set_mode(&path, 0o644);
        let s = load(&path, false).unwrap_err().to_string();
        assert!(
            s.contains("mode 0644") && s.contains("weak key: all 32 bytes are equal"),
            "{s}"
        );
    }

    #[test]
    fn the_default_key_is_never_a_link_a_configured_one_may_be() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.key");
        fs::write(&real, random_key()).unwrap();
        set_mode(&real, 0o600);
        let link = dir.path().join("db.sqlite.key");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = load(&link, true).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(load(&link, false).unwrap(), fs::read(&real).unwrap());
    }

    #[test]
    fn no_default_key_is_created_in_a_world_writable_directory() {
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o1777);
        let path = dir.path().join("db.sqlite.key");
        let err = load(&path, true).unwrap_err();
        assert!(err.to_string().contains("mode 1777"), "{err}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
