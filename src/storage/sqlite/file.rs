//! The database file as operators treat it: created on first use (stale `-wal`/`-shm` files of
//! a removed database are cleared first, so they are never replayed into the new one), noticed
//! when it is removed or replaced under running processes, and moved aside once when found
//! corrupt. Each of these runs under an exclusive lock on the directory, waited for within the
//! call's budget, so that racing processes never remove what another one just made.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `<db>-wal` and `<db>-shm`.
pub fn sidecars(db: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    })
}

/// An exclusive lock on the directory holding the database, released when dropped.
pub struct DirLock(File);

impl DirLock {
    /// Waits for the lock until `deadline`; `Ok(None)` when it could not be had in time.
    pub fn acquire(db: &Path, deadline: Instant) -> io::Result<Option<DirLock>> {
        let dir = db
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let f = File::open(dir)?;
        loop {
            match f.try_lock() {
                Ok(()) => return Ok(Some(DirLock(f))),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(500).min(deadline - now));
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Before creating a database that does not exist: removes `-wal`/`-shm` left by a removed
/// one (SQLite would otherwise replay that old log into the new file). Only regular files: a
/// link or anything else there is left for the trust checks to refuse. Call under [`DirLock`].
pub fn clear_stale_sidecars(db: &Path) -> io::Result<()> {
    if db.symlink_metadata().is_ok() {
        return Ok(());
    }
    for p in sidecars(db) {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_file() => std::fs::remove_file(&p)?,
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Renames the database and its `-wal`/`-shm` to `<db>.corrupt-<unix time>[-wal|-shm]`. Call
/// under [`DirLock`], and only after checking that the path still names the corrupt file.
pub fn move_aside(db: &Path, unix_time: u64) -> io::Result<PathBuf> {
    let mut to = db.as_os_str().to_owned();
    to.push(format!(".corrupt-{unix_time}"));
    let to = PathBuf::from(to);
    std::fs::rename(db, &to)?;
    for (from, suffix) in sidecars(db).iter().zip(["-wal", "-shm"]) {
        let mut side = to.as_os_str().to_owned();
        side.push(suffix);
        match std::fs::rename(from, PathBuf::from(side)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_sidecars_of_a_removed_database_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        for p in sidecars(&db) {
            std::fs::write(p, b"old").unwrap();
        }
        clear_stale_sidecars(&db).unwrap();
        assert!(sidecars(&db).iter().all(|p| !p.exists()));
    }

    #[test]
    fn a_link_in_place_of_a_sidecar_is_left_for_the_trust_checks() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        std::os::unix::fs::symlink("/etc/hostname", &sidecars(&db)[0]).unwrap();
        clear_stale_sidecars(&db).unwrap();
        assert!(sidecars(&db)[0].symlink_metadata().is_ok());
    }

    #[test]
    fn sidecars_of_an_existing_database_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        std::fs::write(&db, b"db").unwrap();
        std::fs::write(&sidecars(&db)[0], b"wal").unwrap();
        clear_stale_sidecars(&db).unwrap();
        assert!(sidecars(&db)[0].exists());
    }

    #[test]
    fn a_corrupt_file_moves_aside_with_its_sidecars() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        std::fs::write(&db, b"junk").unwrap();
        std::fs::write(&sidecars(&db)[0], b"wal").unwrap();
        let to = move_aside(&db, 1_700_000_000).unwrap();
        assert_eq!(to, dir.path().join("rl.sqlite.corrupt-1700000000"));
        assert!(!db.exists() && to.exists());
        assert!(dir.path().join("rl.sqlite.corrupt-1700000000-wal").exists());
    }

    #[test]
    fn the_directory_lock_is_exclusive_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rl.sqlite");
        let held = DirLock::acquire(&db, Instant::now()).unwrap();
        assert!(held.is_some());
        let started = Instant::now();
        let second = DirLock::acquire(&db, started + Duration::from_millis(20)).unwrap();
        assert!(second.is_none());
        assert!(started.elapsed() < Duration::from_millis(200));
        drop(held);
        assert!(DirLock::acquire(&db, Instant::now()).unwrap().is_some());
    }
}
