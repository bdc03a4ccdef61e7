//! The small files of host-wide state beside the database (`<db_path>.breaker`,
//! `<db_path>.queue`), each mapped `MAP_SHARED` by every process of the host. One place opens
//! them under the trust checks, gives them their blocks, maps them and unmaps them.
//!
//! Their blocks are allocated (`posix_fallocate`), not just the length set: a page of a sparse
//! file first written through a mapping on a full disk would kill the process (SIGBUS).
//!
//! A file truncated under a mapping must not kill either: every mapping is registered with
//! [`super::sigbus`], which turns a fault in it into private zero pages and marks it poisoned.
//! Its user checks [`Mapping::poisoned`] after each use, goes on without the file for that call,
//! and opens the file anew on a later one ([`Mapping::open`] extends a short file again and
//! runs its `init`). A file truncated to a few bytes only zeroes the rest of its first page
//! under the mappings, without a fault: each layout tells that from its own contents.

use super::sigbus::{self, Registration};
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
    /// The mapping's place under the SIGBUS handler (None: never after `map`).
    guard: Option<Registration>,
    /// Never unmapped (see [`Mapping::detach`]).
    pinned: bool,
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
        let Some(guard) = sigbus::register(ptr, len) else {
            // SAFETY: just mapped above, for `len` bytes, and not used.
            unsafe { libc::munmap(ptr, len) };
            let what = format!(
                "cannot map the {noun} {}: no SIGBUS handler (or too many state files mapped)",
                path.display()
            );
            return Err(StoreError::new(ErrorKind::Io, what));
        };
        let map = NonNull::new(ptr.cast::<T>())
            .ok_or_else(|| StoreError::new(ErrorKind::Io, "mmap returned address 0"))?;
        Ok(Mapping {
            path: path.to_owned(),
            file,
            map,
            id: (m.dev(), m.ino()),
            guard: Some(guard),
            pinned: false,
        })
    }

    pub fn get(&self) -> &T {
        // SAFETY: `map` is a live mapping of size_of::<T>() bytes (unmapped only in Drop; a
        // fault or `detach` replaces it in place with private zeros, never unmaps it),
        // page-aligned so aligned for T; SharedLayout makes any bytes a valid T that other
        // processes may use at the same time. A truncated file cannot fault us: the mapping is
        // registered with the SIGBUS handler for as long as it is mapped.
        unsafe { self.map.as_ref() }
    }

    /// Whether a fault (the file truncated under us) replaced the mapping with private zeros,
    /// or [`Self::detach`] did: what was read or written through it since is this process's
    /// alone. The user goes on without the file and opens it anew.
    pub fn poisoned(&self) -> bool {
        self.guard.as_ref().is_none_or(Registration::poisoned)
    }

    /// Cuts the mapping from its file now (private zeros, as after a fault) and keeps its
    /// memory mapped until the process ends. For a mapping that memory outside our control
    /// may still point into: the write queue's mutex stays on the thread's robust-mutex list
    /// when its holder could not unlink it (see `queue`), and glibc writes through that list
    /// when the thread next locks a robust mutex. Those writes must land in private memory,
    /// never in the shared file (another process's mutex) nor in a hole.
    pub fn detach(&mut self) {
        if let Some(g) = &self.guard {
            g.poison_now();
        }
        self.pinned = true;
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still names the file mapped, at its full length (false once it was
    /// removed, replaced or truncated: then the caller opens it anew).
    pub fn is_current(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| {
            (m.dev(), m.ino()) == self.id && m.len() >= std::mem::size_of::<T>() as u64
        })
    }
}

impl<T: SharedLayout> Drop for Mapping<T> {
    fn drop(&mut self) {
        let guard = self.guard.take();
        if self.pinned {
            // Left mapped (see `detach`). Its slot is freed only once the memory is private:
            // a mapping the kernel would not replace stays under the handler.
            if guard.as_ref().is_some_and(|g| !g.poisoned()) {
                std::mem::forget(guard);
            }
            return;
        }
        // Out of the handler's table before it is unmapped (a slot names live mappings only).
        drop(guard);
        // SAFETY: `map` was returned by mmap for size_of::<T>() bytes and is unmapped only
        // here; no reference into it outlives `self` (`get` borrows it).
        unsafe { libc::munmap(self.map.as_ptr().cast(), std::mem::size_of::<T>()) };
    }
}

// SAFETY: the mapping is process-wide memory, valid until Drop; SharedLayout makes T usable
// from several processes at once, hence from several threads.
unsafe impl<T: SharedLayout> Send for Mapping<T> {}

#[cfg(test)]
pub(crate) mod tests {
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

    /// A layout of two pages: a truncation to a few bytes leaves its second page beyond the
    /// end.
    #[repr(C)]
    struct Pages([AtomicU64; 1024]);
    // SAFETY: atomics only.
    unsafe impl SharedLayout for Pages {}

    /// Cuts (or extends) the file at `path` to `len` bytes, as `truncate -s` does.
    pub(crate) fn truncate(path: &Path, len: u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap();
    }

    #[test]
    fn a_file_truncated_to_zero_is_read_and_written_without_a_crash_and_reports_poisoned() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let m = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        m.get().0[1].store(5, Ordering::Relaxed);
        assert!(!m.poisoned());
        truncate(&path, 0);
        assert_eq!(m.get().0[1].load(Ordering::Relaxed), 0, "private zeros");
        m.get().0[1].store(9, Ordering::Relaxed);
        assert_eq!(m.get().0[1].load(Ordering::Relaxed), 9);
        assert!(m.poisoned());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "not written to the file"
        );
    }

    #[test]
    fn a_file_truncated_to_a_few_bytes_faults_beyond_them_without_a_crash_and_reports_poisoned() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let m = Mapping::<Pages>::open(&path, "test file", |_| Ok(())).unwrap();
        m.get().0[1000].store(5, Ordering::Relaxed);
        truncate(&path, 8);
        m.get().0[1000].fetch_add(1, Ordering::Relaxed);
        assert_eq!(m.get().0[1000].load(Ordering::Relaxed), 1);
        assert!(m.poisoned());
    }

    #[test]
    fn a_file_truncated_to_a_few_bytes_zeroes_the_rest_of_its_first_page_without_a_fault() {
        // What a layout of one page must tell from its own contents (see `queue`).
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let m = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        m.get().0[0].store(5, Ordering::Relaxed);
        m.get().0[3].store(7, Ordering::Relaxed);
        truncate(&path, 8);
        assert_eq!(m.get().0[0].load(Ordering::Relaxed), 5, "kept");
        assert_eq!(m.get().0[3].load(Ordering::Relaxed), 0, "zeroed");
        assert!(!m.poisoned());
        assert!(!m.is_current(), "short: to be opened anew");
    }

    #[test]
    fn a_mapping_opened_anew_after_a_truncation_is_shared_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let a = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        let b = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        truncate(&path, 0);
        a.get().0[2].load(Ordering::Relaxed);
        assert!(a.poisoned());
        drop(a);
        let a = Mapping::<Words>::open(&path, "test file", |w| {
            w.0[2].store(3, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            32,
            "extended again"
        );
        // b never touched the file while it was empty: its next access finds the new page.
        assert_eq!(b.get().0[2].load(Ordering::Relaxed), 3);
        b.get().0[1].store(4, Ordering::Relaxed);
        assert_eq!(a.get().0[1].load(Ordering::Relaxed), 4);
        assert!(!a.poisoned() && !b.poisoned());
    }

    #[test]
    fn a_detached_mapping_is_cut_from_its_file_and_stays_mapped_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = beside(&dir.path().join("rl.sqlite"), ".test");
        let other = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        let mut m = Mapping::<Words>::open(&path, "test file", |_| Ok(())).unwrap();
        other.get().0[0].store(1, Ordering::Relaxed);
        m.detach();
        assert!(m.poisoned());
        m.get().0[0].store(2, Ordering::Relaxed);
        assert_eq!(
            other.get().0[0].load(Ordering::Relaxed),
            1,
            "not in the file"
        );
        let addr = std::ptr::from_ref(m.get())
            .cast_mut()
            .cast::<libc::c_void>();
        drop(m);
        let mut vec = [0u8; 1];
        // SAFETY: mincore only asks the kernel whether the page is mapped (ENOMEM if not).
        let rc = unsafe { libc::mincore(addr, 1, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "unmapped: {}", std::io::Error::last_os_error());
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
