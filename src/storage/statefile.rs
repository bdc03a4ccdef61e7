//! The small files of host-wide state beside the database (`<db_path>.breaker`,
//! `<db_path>.queue`), each mapped `MAP_SHARED` by every process of the host. One place opens
//! them under the trust checks, gives them their blocks, maps them and unmaps them.
//!
//! Their blocks are allocated (`posix_fallocate`), not just the length set: a page of a sparse
//! file first written through a mapping on a full disk would kill the process (SIGBUS).

use super::{ErrorKind, StoreError};
use std::fs::{File, TryLockError};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// A layout that may live in such a file.
///
/// # Safety
/// Every bit pattern (zeros in a new file, garbage in a damaged one, another process's writes)
/// must be a valid value, and the type must be usable through a shared reference from several
/// processes at once (atomics, or cells only touched through calls made for that).
pub unsafe trait SharedLayout: Sized {}

/// One process's mapping of one state file.
pub struct Mapping<T: SharedLayout> {
    path: PathBuf,
    file: File,
    map: NonNull<T>,
    /// Device and inode of the file mapped, to notice a replaced one.
    id: (u64, u64),
}

/// `<db><suffix>`: where a state file of the database at `db` lives.
pub fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// An I/O failure on the state file `path`, named `noun` ("breaker file", "write queue").
pub fn io_error(noun: &str, path: &Path, what: &str, e: std::io::Error) -> StoreError {
    StoreError::new(
        ErrorKind::Io,
        format!("cannot {what} the {noun} {}", path.display()),
    )
    .with_source(e)
}

/// How long a process waits for another's `flock` on a state file. Its holders keep it for
/// microseconds (memory work, no I/O), so only a holder stopped (SIGSTOP) under it makes a
/// waiter wait this long; the caller then goes on without the file (see its callers).
pub const LOCK_WAIT: Duration = Duration::from_millis(50);

/// An exclusive `flock` on a state file, released when dropped (or by the kernel when its
/// holder dies, even by SIGKILL).
pub struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    /// Takes the lock, waiting [`LOCK_WAIT`] at most (`flock` has no timed wait: polled).
    pub fn take(file: &'a File, path: &Path, noun: &str) -> Result<Self, StoreError> {
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Locked(file)),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(50));
                }
                Err(TryLockError::WouldBlock) => {
                    let what =
                        format!("the {noun} {} is locked by another process", path.display());
                    return Err(StoreError::new(ErrorKind::Busy, what));
                }
                Err(TryLockError::Error(e)) => return Err(io_error(noun, path, "lock", e)),
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl<T: SharedLayout> Mapping<T> {
    /// Opens (creating it, with the database's mode) and maps the file at `path`, after the
    /// trust checks ([`crate::trust::open_state_file`]: a file that is not ours is refused as
    /// `Misconfigured`). Under an exclusive `flock`, which every opener takes, a short file is
    /// extended with zeros and `init` runs on the mapping, so that nobody uses a layout before
    /// it is ready.
    pub fn open(
        path: &Path,
        noun: &str,
        init: impl FnOnce(&T) -> Result<(), StoreError>,
    ) -> Result<Self, StoreError> {
        let file = crate::trust::open_state_file(path)?;
        // Held across the mapping and `init`, then let go by hand (or, on an error, by closing
        // the file): the guard cannot outlive the move of `file` into the mapping.
        std::mem::forget(Locked::take(&file, path, noun)?);
        let opened = Self::map(file, path, noun).and_then(|m| init(m.get()).map(|()| m));
        if let Ok(m) = &opened {
            let _ = m.file.unlock();
        }
        // On an error the file is closed, which releases the lock.
        opened
    }

    fn map(file: File, path: &Path, noun: &str) -> Result<Self, StoreError> {
        let len = std::mem::size_of::<T>();
        let m = file
            .metadata()
            .map_err(|e| io_error(noun, path, "stat", e))?;
        if m.len() < len as u64 {
            // SAFETY: on a descriptor we own, opened for writing.
            let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
            if rc != 0 {
                let e = std::io::Error::from_raw_os_error(rc);
                return Err(io_error(noun, path, "allocate", e));
            }
        }
        // SAFETY: a fresh mapping (the kernel picks the address) of `len` bytes of a file at
        // least that long (checked or extended just above, under the caller's lock),
        // read-write and shared, of a descriptor opened read-write; checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(io_error(noun, path, "map", e));
        }
        let map = NonNull::new(ptr.cast::<T>())
            .ok_or_else(|| StoreError::new(ErrorKind::Io, "mmap returned address 0"))?;
        Ok(Mapping {
            path: path.to_owned(),
            file,
            map,
            id: (m.dev(), m.ino()),
        })
    }

    pub fn get(&self) -> &T {
        // SAFETY: `map` is a live MAP_SHARED mapping of size_of::<T>() bytes (unmapped only in
        // Drop), page-aligned so aligned for T; SharedLayout makes any bytes a valid T that
        // other processes may use at the same time.
        unsafe { self.map.as_ref() }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still names the file mapped (false once it was removed or replaced).
    pub fn is_current(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }
}

impl<T: SharedLayout> Drop for Mapping<T> {
    fn drop(&mut self) {
        // SAFETY: `map` was returned by mmap for size_of::<T>() bytes and is unmapped only
        // here; no reference into it outlives `self` (`get` borrows it).
        unsafe { libc::munmap(self.map.as_ptr().cast(), std::mem::size_of::<T>()) };
    }
}

// SAFETY: the mapping is process-wide memory, valid until Drop; SharedLayout makes T usable
// from several processes at once, hence from several threads.
unsafe impl<T: SharedLayout> Send for Mapping<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[repr(C)]
    struct Words([AtomicU64; 4]);
    // SAFETY: atomics only: any bytes are valid, and shared use is what they are for.
    unsafe impl SharedLayout for Words {}

    #[test]
    fn a_new_file_has_its_blocks_and_reads_as_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let m = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        assert!(m.get().0.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 32);
        assert!(meta.blocks() > 0, "sparse: {} blocks", meta.blocks());
    }

    #[test]
    fn two_mappings_of_one_file_see_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let a = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        let b = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        a.get().0[2].store(7, Ordering::Relaxed);
        assert_eq!(b.get().0[2].load(Ordering::Relaxed), 7);
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_a_bounded_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        drop(Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap());
        // Another open file description holds it (as a process stopped under it would).
        let other = File::open(&path).unwrap();
        other.lock().unwrap();
        let t = Instant::now();
        let e = Mapping::<Words>::open(&path, "test file", |_| Ok(()))
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy);
        let took = t.elapsed();
        assert!(took >= LOCK_WAIT && took < 20 * LOCK_WAIT, "{took:?}");
        other.unlock().unwrap();
        assert!(Mapping::<Words>::open(&path, "test file", |_| Ok(())).is_ok());
    }

    #[test]
    fn a_failed_init_leaves_the_file_unlocked() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let failed = Mapping::<Words>::open(&path, "test file", |_| {
            Err(StoreError::new(ErrorKind::Io, "injected"))
        });
        assert!(failed.is_err());
        assert!(Mapping::<Words>::open(&path, "test file", |_| Ok(())).is_ok());
    }
}
