//! The HMAC key every worker of a host shares. It is read from a file, never from php.ini
//! (every ini value shows in `ini_get()` and `phpinfo()`). The default file, next to the
//! database, is created on first use; workers racing to create it all end with one key,
//! because each writes a private temporary file and publishes it with `link(2)`, which fails
//! if the name exists.

use crate::core::subject::MIN_KEY_LEN;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum KeyError {
    Missing { path: PathBuf },
    TooShort { path: PathBuf, len: usize },
    Io { path: PathBuf, source: io::Error },
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
            KeyError::Io { path, source } => {
                write!(f, "ratelimit: key file {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// Reads the key at `path`; when `create` is set and the file is missing, creates it first
/// with 32 random bytes, mode 0600.
pub fn load(path: &Path, create: bool) -> Result<Vec<u8>, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    match fs::read(path) {
        Ok(key) if key.len() < MIN_KEY_LEN => Err(KeyError::TooShort {
            path: path.to_owned(),
            len: key.len(),
        }),
        Ok(key) => Ok(key),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            publish_new_key(path).map_err(io)?;
            load(path, false)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(KeyError::Missing {
            path: path.to_owned(),
        }),
        Err(e) => Err(io(e)),
    }
}

fn publish_new_key(path: &Path) -> io::Result<()> {
    let mut key = [0u8; 32];
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut key).map_err(io::Error::other)?;
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
        let err = load(&path, true).unwrap_err();
        assert!(matches!(err, KeyError::TooShort { len: 31, .. }));
        assert!(err.to_string().contains(path.to_str().unwrap()));
    }
}
