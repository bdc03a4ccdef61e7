//! The host's write queue: a robust, process-shared mutex in a small file beside the database
//! (`<db_path>.queue`, mmap'd), taken before `BEGIN IMMEDIATE`.
//!
//! **Why.** SQLite's write lock is a POSIX lock that a waiter can only poll (our busy handler
//! sleeps and retries, see [`super::busy`]). With more FPM workers than cores, pollers wake to
//! find the lock still taken and steal CPU from its holder. A futex queues waiters in the
//! kernel instead: each sleeps until the holder unlocks, and then exactly one wakes. Measured
//! with 8 processes admitting on one subject on 2 cores (CONTRIBUTING.md, "Speed"): p99 62-107 us
//! against 457-644 us polling, at the same throughput.
//!
//! **It is only an optimisation.** SQLite's own lock still decides who writes: every
//! transaction still begins with `BEGIN IMMEDIATE`. Whatever happens to the queue (a holder
//! stopped or killed, the file removed, replaced or damaged) can make a call wait or skip the
//! queue, never let two writers in at once. So the queue is never a reason to fail a call:
//!
//! - a holder killed (even by SIGKILL) hands the mutex on: the kernel marks it
//!   owner-died and wakes a waiter (a robust mutex), which makes it consistent and goes on;
//! - a waiter waits in the queue for half of its budget at most (the caller's choice, see
//!   `SqliteStore::write`), then polls SQLite's lock for the rest: the mutex is not fair (a
//!   running process can take it before a woken waiter), and a waiter passed over again and
//!   again must not answer "unavailable". Measured with 8 processes admitting on one subject
//!   on 2 cores: waiting a whole 100 ms budget in the queue, 2 calls in 370,000 did;
//! - a holder stopped (SIGSTOP) costs a waiter that wait, as a stopped holder of SQLite's lock
//!   costs it its whole budget; when nobody let go of the queue meanwhile, the process skips
//!   it for [`SKIP_AFTER_TIMEOUT`] (so a stuck queue costs each process one wait, not every
//!   call one);
//! - a mutex that cannot be used (unrecoverable, or a file that is not a queue) is skipped.
//!
//! The wait is timed on `CLOCK_MONOTONIC` (a futex wait made here, see [`lock`]): a wall clock
//! set back must not lengthen it.
//!
//! **A file truncated, re-initialised or damaged under us.** Truncated to 0 (or to less than
//! its mutex), the file's page faults, and the SIGBUS handler ([`super::super::sigbus`]) gives
//! this process private zeros instead (the mapping is *poisoned*); truncated to a few bytes,
//! the rest of its page is zeroed under every mapping without a fault; a process that opens it
//! next extends it and initialises a new mutex in it, under the mappings of the others, which
//! find the new page without a fault, even in the middle of a call into glibc (a process may
//! be preempted there). So each open notes the file's `nonce` (random, written last by the init
//! that made the mutex, zeroed first by the next, and last in the layout, so that any
//! truncation zeroes it), and the mutex and the count of refills are used only while the
//! mapping is not poisoned and the nonce is still the one noted. Otherwise the queue is
//! *stale*: the call goes on to SQLite's lock, and the caller opens the file anew (which
//! initialises it again when needed) on its next call. A holder never hands the mutex in the
//! file to glibc's unlock, which follows pointers kept in it: see `Held`'s drop.

use super::super::statefile::{self, Mapping, SharedLayout};
use super::super::StoreError;
use std::cell::UnsafeCell;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "RLQUEUE1": the layout of the first 64 bytes (older builds' whole file), written when the
/// file is first initialised.
const MAGIC: u64 = u64::from_le_bytes(*b"RLQUEUE1");

/// How long a process goes straight to SQLite's lock after a wait in the queue during which
/// nobody let go of it (its holder is stopped, or something holds the queue and not the lock).
pub const SKIP_AFTER_TIMEOUT: Duration = Duration::from_secs(1);

#[repr(C)]
struct Shared {
    magic: AtomicU64,
    /// Bumped by every holder as it lets go: a waiter that timed out tells by it a queue that
    /// moves (it was passed over) from one that is stuck.
    turns: AtomicU64,
    /// The mutex of older builds (their file ends after `refills`): initialised with a new
    /// file for them, never locked by this build, never initialised again (older builds'
    /// processes may hold it during an upgrade).
    old_mutex: UnsafeCell<libc::pthread_mutex_t>,
    /// Bumped after every commit that gave a bucket tokens back other than by refill (a reset,
    /// an eviction): each process's deny cache forgets its denials when it moves. Where older
    /// builds have it, so that both count into one during an upgrade.
    refills: AtomicU64,
    /// The queue.
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    /// Random and never 0 once the file is ready; zeroed first and written last by each init
    /// (see the module doc). Last, so that a truncation to any length zeroes it.
    nonce: AtomicU64,
}

const _: () = assert!(
    offset_of!(Shared, refills) == 56 && offset_of!(Shared, mutex) == 64,
    "the layout: older builds' first 64 bytes, then the mutex"
);

/// How the file is named in errors.
const NOUN: &str = "write queue";

/// The futex word of a robust mutex (kernel ABI, `futex(2)`): the owner's thread id, and
/// these bits.
const FUTEX_WAITERS: u32 = 0x8000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;

// SAFETY: u64 atomics and pthread mutexes: any bytes are a valid value (a mutex that is not one
// is refused by its calls, and is initialised when the magic or the nonce is wrong), and the
// mutexes are only ever touched through the pthread calls made for shared use, or atomically
// (their futex word).
unsafe impl SharedLayout for Shared {}

/// One process's mapping of the host's queue.
pub struct Queue {
    map: Mapping<Shared>,
    /// Until when this process skips the queue (see the module doc).
    skip_until: Option<Instant>,
    /// The file's nonce when this process opened it.
    nonce: u64,
    /// The file was truncated, re-initialised or damaged under this mapping: it is not used
    /// any more, and the caller opens the file anew ([`Queue::is_stale`]).
    stale: bool,
}

/// The queue held; unlocked when dropped (also when a panic unwinds through the transaction).
/// It borrows the Queue, so the thread that locked the mutex is the one that unlocks it.
pub struct Held<'q> {
    q: &'q mut Queue,
    /// Where glibc linked the mutex into this thread's robust list (see `robust_head`), and
    /// the list's first entry before: None when the lock linked nothing here.
    linked: Option<(usize, usize)>,
}

impl Queue {
    /// Where a host's queue lives: beside its database.
    pub fn path_for(db: &Path) -> PathBuf {
        statefile::beside(db, ".queue")
    }

    /// Opens (creating it, mode 0600) and maps the queue at `path` ([`Mapping::open`]: the
    /// trust checks, a file that is not ours refused). A file that is not ready (new,
    /// truncated, damaged) gets its mutex initialised under the opening `flock`, so nobody uses
    /// it before it is ready (see [`init`]).
    pub fn open(path: &Path) -> Result<Queue, StoreError> {
        let map = Mapping::open(path, NOUN, |shared: &Shared| init(shared, path))?;
        let nonce = map.get().nonce.load(Ordering::Acquire);
        let mut q = Queue {
            map,
            skip_until: None,
            nonce,
            stale: false,
        };
        // Truncated again while it was being opened: stale from the start.
        q.check();
        Ok(q)
    }

    /// Whether the file was found truncated, re-initialised or damaged under this mapping:
    /// then the caller drops this Queue and opens the file anew.
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Whether the mapping still shows the file as this process opened it: not poisoned by a
    /// fault, and the nonce still the one noted at open (see the module doc).
    fn intact(&self) -> bool {
        let s = self.shared();
        s.magic.load(Ordering::Acquire) == MAGIC
            && s.nonce.load(Ordering::Acquire) == self.nonce
            && self.nonce != 0
            && !self.map.poisoned()
    }

    /// [`Self::intact`], remembered as stale when not. True when the queue may be used.
    fn check(&mut self) -> bool {
        if !self.stale && !self.intact() {
            self.stale = true;
        }
        !self.stale
    }

    /// Whether the path still names the file mapped (false once it was removed or replaced:
    /// then the caller opens it anew, so that every process queues on the same file again).
    pub fn is_current(&self) -> bool {
        self.map.is_current()
    }

    /// Waits for the queue, at most `within` (none: no wait at all). None when the call
    /// goes on without holding it (skipped, unusable, timed out): straight to SQLite's lock.
    pub fn enter(&mut self, within: Option<Duration>) -> Option<Held<'_>> {
        if self.skip_until.is_some_and(|t| Instant::now() < t) || !self.check() {
            return None;
        }
        self.skip_until = None;
        let mutex = self.shared().mutex.get();
        let turns = self.shared().turns.load(Ordering::Relaxed);
        let before = robust_head().map(first_entry);
        let rc = lock(mutex, within.map(monotonic_after));
        match rc {
            0 => Some(self.held(before)),
            libc::EOWNERDEAD => {
                // Its holder died holding it: nothing it protected needs repair (SQLite's own
                // lock and journal covered the transaction), so it is consistent as it is.
                // SAFETY: we own the mutex now (EOWNERDEAD means it was locked for us).
                unsafe { libc::pthread_mutex_consistent(mutex) };
                Some(self.held(before))
            }
            // The file changed under the wait (truncated, initialised anew; EFAULT: the page
            // went away under the kernel's wait): not a stuck queue, a stale mapping, opened
            // anew by the next call.
            _ if !self.check() => None,
            libc::EFAULT => {
                self.stale = true;
                None
            }
            // No time left to wait: nothing is known about the queue.
            libc::EBUSY => None,
            // Passed over while others went through: the queue works, this call polls.
            libc::ETIMEDOUT if self.shared().turns.load(Ordering::Relaxed) != turns => None,
            // ETIMEDOUT with nobody through: stuck, see SKIP_AFTER_TIMEOUT. ENOTRECOVERABLE,
            // EINVAL (not a mutex we made), EDEADLK (cannot happen: one transaction at a time
            // per process): the queue is of no use for now, SQLite's lock is.
            _ => {
                self.skip_until = Some(Instant::now() + SKIP_AFTER_TIMEOUT);
                None
            }
        }
    }

    /// The queue just locked: where glibc linked its mutex into this thread's robust list
    /// (the list's first entry now, if it lies in the mutex), with the first entry `before`.
    fn held(&mut self, before: Option<usize>) -> Held<'_> {
        let at = self.shared().mutex.get() as usize;
        let first = robust_head().map(first_entry);
        let linked = match (first, before) {
            (Some(e), Some(b)) if (at..at + size_of::<libc::pthread_mutex_t>()).contains(&e) => {
                Some((e, b))
            }
            _ => None,
        };
        Held { q: self, linked }
    }

    /// The count of commits that gave tokens back other than by refill (see `Shared`); None
    /// once the file cannot vouch for it (stale: truncated, re-initialised or damaged under
    /// us, where the count started again and could come back to a value seen before).
    pub fn refills(&mut self) -> Option<u64> {
        if self.stale {
            return None;
        }
        let count = self.shared().refills.load(Ordering::Acquire);
        // Checked after the count is read: the nonce still ours vouches for it.
        self.check().then_some(count)
    }

    /// Says that a commit just gave a bucket tokens back other than by refill.
    pub fn refilled(&self) {
        self.shared().refills.fetch_add(1, Ordering::Release);
    }

    fn shared(&self) -> &Shared {
        self.map.get()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let q = &mut *self.q;
        // SAFETY (of what follows, with `enter` and `held`): the mutex in the file may have
        // been zeroed, made anew or overwritten while we held it, even between two reads of one
        // call (a process may be preempted anywhere, and a truncation, an extension and a new
        // init fit in that time).
        // - glibc links a robust mutex it locks into the thread's robust list (kernel ABI: the
        //   entry lies inside the mutex; the kernel walks the list when the thread dies and
        //   marks the mutexes it finds locked by it) and unlinks it in its unlock, writing
        //   through links it reads from the mutex: links changed under it make it write
        //   anywhere (SIGSEGV, or worse). So the mutex in the file is never handed to glibc's
        //   unlock. The holder lets go of the futex word itself (kernel ABI: the owner's thread
        //   id, FUTEX_WAITERS; see `release`), only while it still names this thread, and then
        //   unlinks the entry as the kernel ABI has the list: the head's first word pointed to
        //   this entry, and points again to the entry that was first before the lock. Nothing
        //   of the file is read for that. (glibc keeps back links too; the one it set in the
        //   entry that was first is stale then, and only read when that entry is unlinked by
        //   glibc: the head never is, and another robust mutex held across our call, which
        //   nothing in PHP does, gets this mapping detached so that the write lands in it.)
        // - Without a link (a lock taken on zeros: a plain mutex, linked nowhere) nothing is
        //   unlinked. If the list still points into this mapping anyway, the thread's next
        //   robust lock writes through it: the mapping is detached (private zeros, never
        //   unmapped), so that those writes land in private memory, never in the shared file
        //   (another process's mutex) nor in a hole.
        // - The futex word let go of first, then the list: a holder killed in between leaves
        //   no word naming it behind, off its list (which would keep the mutex locked for
        //   good); the kernel's walk of its list then only changes words naming that thread.
        // - The file's other fields glibc keeps (owner, users, links) are left as they are:
        //   the next holder's trylock sets them, and nobody reads them but glibc's unlock.
        //   Waits are bounded, on whatever the word is; a lock taken on zeros is held by this
        //   process alone. Nothing here can let anyone in that SQLite's lock would not.
        let s = q.shared();
        s.turns.fetch_add(1, Ordering::Relaxed);
        release(&s.mutex, this_thread());
        let mut detach = false;
        if let (Some(head), Some((entry, before))) = (robust_head(), self.linked) {
            if first_entry(head) == entry {
                // SAFETY: the head this thread registered (see `robust_head`), changed by
                // this thread alone; `before` was its first entry before our lock linked ours.
                unsafe { std::ptr::write_volatile(head, before) };
                detach = before != head as usize;
            }
        }
        let start = std::ptr::from_ref(q.shared()) as usize;
        let range = start..start + size_of::<Shared>();
        if detach || robust_head().is_none_or(|h| range.contains(&(first_entry(h) & !1))) {
            q.map.detach();
        }
        q.check();
    }
}

/// The head of this thread's robust-mutex list, as registered with the kernel (kernel ABI,
/// `get_robust_list(2)`: its first word points to the first entry, the head itself when the
/// list is empty); None when the kernel does not say.
fn robust_head() -> Option<*mut usize> {
    thread_local! {
        static HEAD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let head = HEAD.with(|h| {
        if h.get() == 0 {
            let (mut head, mut len): (*mut usize, usize) = (std::ptr::null_mut(), 0);
            // SAFETY: asks the kernel for this thread's head, into two valid out-pointers.
            let rc = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
            if rc == 0 {
                h.set(head as usize);
            }
        }
        h.get()
    });
    (head != 0).then_some(head as *mut usize)
}

/// The first entry of the list at `head`, as stored (its low bit a flag, 0 for our mutexes).
fn first_entry(head: *mut usize) -> usize {
    // SAFETY: the head glibc registered for this thread (in its thread descriptor, alive as
    // long as the thread), read by the thread itself, which alone changes it.
    unsafe { std::ptr::read_volatile(head) }
}

/// This thread's id, as the futex word names an owner.
fn this_thread() -> u32 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::gettid() }) as u32 & FUTEX_TID_MASK
}

/// Lets go of `mutex`'s futex word in the file if it still names this thread `tid` (not when
/// it was zeroed, made anew or overwritten), and wakes a waiter if one sleeps (as glibc's
/// unlock does). Its errors are of no consequence: EFAULT when the page went away meanwhile.
fn release(mutex: &UnsafeCell<libc::pthread_mutex_t>, tid: u32) {
    let word = mutex.get().cast::<AtomicU32>();
    // SAFETY: the word lies in our live mapping (a fault gives private memory in place),
    // 4-aligned; atomics only.
    let word = unsafe { &*word };
    let mut v = word.load(Ordering::Relaxed);
    loop {
        if v & FUTEX_TID_MASK != tid {
            return;
        }
        match word.compare_exchange(v, 0, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => v = now,
        }
    }
    if v & FUTEX_WAITERS != 0 {
        // SAFETY: a futex wake on a word of our mapping (a shared futex, as the mutex is
        // process-shared); the kernel only reads the address.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
    }
}

/// Makes the file ready under the opening `flock`, unless it is: a magic and a nonce,
/// written last, say its mutex was made and nothing was truncated since.
fn init(shared: &Shared, path: &Path) -> Result<(), StoreError> {
    let magic = shared.magic.load(Ordering::Acquire);
    if magic == MAGIC && shared.nonce.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    // Unsealed first: from here on, a process that still maps the file sees a nonce that is
    // not its own and leaves the mutex alone.
    shared.nonce.store(0, Ordering::SeqCst);
    if magic != MAGIC {
        // A new file (or garbage): older builds' mutex too, as they would make it.
        init_mutex(&shared.old_mutex, path)?;
        shared.magic.store(MAGIC, Ordering::Release);
    }
    init_mutex(&shared.mutex, path)?;
    shared.nonce.store(new_nonce(path)?, Ordering::Release);
    Ok(())
}

/// Makes `mutex` a robust, process-shared mutex.
fn init_mutex(mutex: &UnsafeCell<libc::pthread_mutex_t>, path: &Path) -> Result<(), StoreError> {
    // SAFETY: under the exclusive flock every opener takes, and with the nonce zeroed, so no
    // process of this build locks this mutex now (one that held it lets go as Held's drop
    // says; older builds' mutex is made only with a new file); attr is initialised before use
    // and destroyed after.
    let rc = unsafe {
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        libc::pthread_mutexattr_init(&mut attr);
        libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
        libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
        let rc = libc::pthread_mutex_init(mutex.get(), &attr);
        libc::pthread_mutexattr_destroy(&mut attr);
        rc
    };
    if rc != 0 {
        let e = std::io::Error::from_raw_os_error(rc);
        return Err(statefile::io_error(NOUN, path, "initialise", e));
    }
    Ok(())
}

/// A random nonce, never 0.
fn new_nonce(path: &Path) -> Result<u64, StoreError> {
    loop {
        let mut b = [0u8; 8];
        rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut b).map_err(|e| {
            let e = std::io::Error::other(e.to_string());
            statefile::io_error(NOUN, path, "draw a nonce for", e)
        })?;
        let n = u64::from_le_bytes(b);
        if n != 0 {
            return Ok(n);
        }
    }
}

/// Locks the robust mutex at `mutex`, waiting until `deadline` (`CLOCK_MONOTONIC`; none: no
/// wait): 0, EOWNERDEAD (locked, see `pthread_mutex_lock`), or why not (EBUSY, ETIMEDOUT,
/// EFAULT when the page went away under the kernel's wait, or what the trylock said).
///
/// Why not `pthread_mutex_clocklock`: it waits with a futex call that glibc treats as fatal
/// when it fails with EFAULT ("The futex facility returned an unexpected error code", abort),
/// and it does fail so when the file is truncated between glibc's last touch of the mutex and
/// the call. So the wait is made here as glibc makes it (the lock word is the kernel's robust
/// futex word: the owner's thread id, FUTEX_WAITERS set by a waiter before it sleeps, and a
/// waiter that slept takes the mutex with FUTEX_WAITERS set, so that its unlock wakes the
/// next), taking the mutex itself with `pthread_mutex_trylock`, which never waits.
fn lock(mutex: *mut libc::pthread_mutex_t, deadline: Option<libc::timespec>) -> libc::c_int {
    // glibc's `__data.__lock`, the first member of every pthread_mutex_t (bits/struct_mutex.h):
    // the futex word.
    let word = mutex.cast::<AtomicU32>();
    let (mut slept, mut ownerless) = (false, 0);
    loop {
        // SAFETY: the mutex was initialised (magic and nonce checked by the caller) in our
        // mapping, which stays mapped (a fault gives private memory in place).
        let rc = unsafe { libc::pthread_mutex_trylock(mutex) };
        if rc == 0 || rc == libc::EOWNERDEAD {
            if slept {
                // SAFETY: the word lies in our live mapping, 4-aligned; atomics only.
                unsafe { (*word).fetch_or(FUTEX_WAITERS, Ordering::Relaxed) };
            }
            return rc;
        }
        let Some(deadline) = deadline else {
            return rc;
        };
        if rc != libc::EBUSY {
            return rc;
        }
        // SAFETY: as above.
        let v = unsafe { (*word).load(Ordering::Relaxed) };
        if v & FUTEX_TID_MASK == 0 {
            // Let go meanwhile, or its owner died: the trylock tells. Busy with no owner
            // again and again: not a word glibc wrote (garbage), of no use.
            ownerless += 1;
            if ownerless > 1_000 {
                return libc::EINVAL;
            }
            continue;
        }
        if v & FUTEX_WAITERS == 0 {
            // SAFETY: as above.
            let set = unsafe {
                (*word).compare_exchange(v, v | FUTEX_WAITERS, Ordering::Acquire, Ordering::Relaxed)
            };
            if set.is_err() {
                continue;
            }
        }
        // SAFETY: a futex wait on a word of our mapping (a shared futex, as the mutex is
        // process-shared) until an absolute CLOCK_MONOTONIC time; the kernel only reads it.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                word,
                libc::FUTEX_WAIT_BITSET,
                v | FUTEX_WAITERS,
                &deadline as *const libc::timespec,
                std::ptr::null::<u32>(),
                libc::FUTEX_BITSET_MATCH_ANY,
            )
        };
        if r != 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => {}
                Some(libc::ETIMEDOUT) => return libc::ETIMEDOUT,
                Some(e) => return e,
                None => return libc::EINVAL,
            }
        }
        slept = true;
    }
}

fn monotonic_after(d: Duration) -> libc::timespec {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let nanos = now.tv_nsec as u64 + u64::from(d.subsec_nanos());
    libc::timespec {
        tv_sec: now
            .tv_sec
            .saturating_add(d.as_secs().min(i64::MAX as u64 / 2) as libc::time_t)
            .saturating_add((nanos / 1_000_000_000) as libc::time_t),
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::storage::statefile::tests::truncate;
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::{Child, Command, Stdio};

    /// Set in a child test process: the queue it takes and holds until killed.
    const CHILD_ENV: &str = "RL_TEST_QUEUE_HOLDER";
    /// Set too when the child, once it let go, must open the file anew and take the queue
    /// again (see [`holder_taking_it_again`]).
    const AGAIN_ENV: &str = "RL_TEST_QUEUE_AGAIN";

    /// Not a test of its own: the body of the child process [`holder`] starts (it does
    /// nothing unless started so).
    #[test]
    #[ignore = "run by holder() in a child process"]
    fn child_holds_the_queue() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let mut q = Queue::open(Path::new(&path)).unwrap();
        let held = q.enter(Some(Duration::from_secs(5)));
        assert!(held.is_some());
        println!("\nheld");
        // Until the parent closes our stdin (it drops its Child, or dies): no child outlives
        // a failed test.
        let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8]);
        drop(held);
        if std::env::var_os(AGAIN_ENV).is_some() {
            assert!(q.is_stale(), "the file changed under us");
            let old = std::ptr::from_ref(q.shared())
                .cast_mut()
                .cast::<libc::c_void>();
            drop(q);
            // Where the old mapping was, if it was unmapped: a page no write may reach, so that
            // a write through a robust list still pointing there faults, rather than land in
            // the new mapping when the kernel puts it at the same address. (A detached mapping
            // is still there: this fails, and is not needed.)
            // SAFETY: MAP_FIXED_NOREPLACE never replaces a mapping; a new anonymous page.
            unsafe {
                libc::mmap(
                    old,
                    1,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            let mut q = Queue::open(Path::new(&path)).unwrap();
            assert!(q.enter(Some(Duration::from_secs(5))).is_some());
        }
    }

    /// Another process holding the queue at `path` until killed or dropped; returns once it
    /// holds it.
    pub fn holder(path: &Path) -> Child {
        start_holder(path, false)
    }

    /// Another process holding the queue at `path` until told to let go ([`let_go`]); then,
    /// the file having changed under it, it opens the file anew and takes the queue again (a
    /// robust lock after one on memory that was zeroed or made anew). Its exit says whether
    /// all of that worked: 0, or killed by a signal.
    fn holder_taking_it_again(path: &Path) -> Child {
        start_holder(path, true)
    }

    /// Tells the holder to let go and waits for it to end (20 s at most).
    fn let_go(mut child: Child) -> std::process::ExitStatus {
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the holder did not end after it was told to let go");
    }

    fn start_holder(path: &Path, again: bool) -> Child {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "storage::sqlite::queue::tests::child_holds_the_queue",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ]);
        if again {
            cmd.env(AGAIN_ENV, "1");
        }
        let mut child = cmd
            .env(CHILD_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            if line.trim_end() == "held" {
                // Kept open: the child's last words (the test harness's) must not fail it.
                child.stdout = Some(out.into_inner());
                return child;
            }
            line.clear();
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child process did not take the queue");
    }

    pub fn signal(child: &Child, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    }

    fn queue_in(dir: &tempfile::TempDir) -> (PathBuf, Queue) {
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let q = Queue::open(&path).unwrap();
        (path, q)
    }

    #[test]
    fn a_new_queue_is_free_and_made_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut q) = queue_in(&dir);
        assert!(q.enter(Some(Duration::ZERO)).is_some());
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_waiter_gets_the_queue_when_its_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut a) = queue_in(&dir);
        let held = a.enter(Some(Duration::ZERO)).unwrap();
        let waiter = std::thread::spawn(move || {
            let mut b = Queue::open(&path).unwrap();
            let got = b.enter(Some(Duration::from_secs(10))).is_some();
            (got, Instant::now())
        });
        std::thread::sleep(Duration::from_millis(50));
        // However late the waiter started, it cannot have had the queue before this.
        let released = Instant::now();
        drop(held);
        let (got, at) = waiter.join().unwrap();
        assert!(got);
        assert!(at >= released, "had the queue while it was held");
    }

    #[test]
    fn a_holder_killed_by_sigkill_hands_it_on_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut q) = queue_in(&dir);
        let mut child = holder(&path);
        assert!(q.enter(Some(Duration::from_millis(20))).is_none(), "held");
        q.skip_until = None;
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
        let t = Instant::now();
        let held = q.enter(Some(Duration::from_secs(10)));
        assert!(held.is_some());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        drop(held);
        // Consistent again: the next one takes it as usual.
        assert!(q.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn a_stopped_holder_costs_one_wait_then_the_queue_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut q) = queue_in(&dir);
        let mut child = holder(&path);
        signal(&child, libc::SIGSTOP);
        let t = Instant::now();
        assert!(q.enter(Some(Duration::from_millis(400))).is_none());
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(400), "{waited:?}");
        let t = Instant::now();
        assert!(q.enter(Some(Duration::from_millis(400))).is_none());
        let took = t.elapsed();
        assert!(took < Duration::from_millis(200), "{took:?}");
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
        // After SKIP_AFTER_TIMEOUT, the queue is used again.
        q.skip_until = Some(Instant::now());
        assert!(q.enter(Some(Duration::from_secs(10))).is_some());
    }

    #[test]
    fn a_waiter_passed_over_while_others_go_through_keeps_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut a) = queue_in(&dir);
        let held = a.enter(Some(Duration::ZERO)).unwrap();
        let mut b = Queue::open(&path).unwrap();
        let (ready, waiting) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                ready.send(()).unwrap();
                assert!(b.enter(Some(Duration::from_secs(2))).is_none());
                b.skip_until
            });
            // Others going through meanwhile (as when a running process takes the mutex
            // before the woken waiter): only the count of turns matters here. Counted once
            // the waiter is on its way into its wait, so that its wait sees the count change.
            waiting.recv().unwrap();
            std::thread::sleep(Duration::from_millis(200));
            held.q.shared().turns.fetch_add(1, Ordering::Relaxed);
            assert!(waiter.join().unwrap().is_none(), "the queue was skipped");
        });
        drop(held);
        assert!(b.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn no_time_left_means_no_wait() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut a) = queue_in(&dir);
        let _held = a.enter(Some(Duration::ZERO)).unwrap();
        let mut b = Queue::open(&path).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = Instant::now();
                assert!(b.enter(None).is_none());
                assert!(t.elapsed() < Duration::from_millis(500));
                // Nothing was learnt from it: the next call waits in the queue again.
                assert!(b.skip_until.is_none());
            });
        });
    }

    #[test]
    fn a_file_someone_else_made_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        std::fs::write(&path, vec![0u8; std::mem::size_of::<Shared>()]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(Queue::open(&path).is_err());
    }

    #[test]
    fn a_replaced_file_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, q) = queue_in(&dir);
        assert!(q.is_current());
        std::fs::remove_file(&path).unwrap();
        let _new = Queue::open(&path).unwrap();
        assert!(!q.is_current());
    }

    fn took_it_again(status: std::process::ExitStatus) {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.success(),
            "the holder failed: {status:?} (signal {:?})",
            status.signal()
        );
    }

    #[test]
    fn a_queue_whose_file_was_truncated_is_stale_and_knows_no_count() {
        for len in [0, 8] {
            let dir = tempfile::tempdir().unwrap();
            let (path, mut q) = queue_in(&dir);
            assert_eq!(q.refills(), Some(0));
            truncate(&path, len);
            assert_eq!(q.refills(), None, "truncated to {len}");
            assert!(q.is_stale());
            assert!(q.enter(Some(Duration::ZERO)).is_none());
        }
    }

    #[test]
    fn a_queue_made_anew_under_a_mapping_is_stale_there() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut q) = queue_in(&dir);
        truncate(&path, 0);
        // Another process opens it first: the file is extended and initialised again, and
        // this mapping's next access finds the new page, without a fault.
        let mut other = Queue::open(&path).unwrap();
        assert!(other.enter(Some(Duration::ZERO)).is_some());
        assert_eq!(q.refills(), None);
        assert!(q.is_stale() && !q.map.poisoned());
    }

    #[test]
    fn a_holder_whose_file_is_truncated_to_zero_lets_go_and_takes_it_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder_taking_it_again(&path);
        truncate(&path, 0);
        // Its unlock faults (the file is empty): private zeros, nothing of its own to let go.
        took_it_again(let_go(child));
        let mut q = Queue::open(&path).unwrap();
        assert!(
            q.enter(Some(Duration::ZERO)).is_some(),
            "free after the reopen"
        );
    }

    #[test]
    fn a_holder_whose_file_is_truncated_to_a_few_bytes_lets_go_and_takes_it_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder_taking_it_again(&path);
        // No fault: the mutex is zeroed under the holder.
        truncate(&path, 8);
        took_it_again(let_go(child));
        let mut q = Queue::open(&path).unwrap();
        assert!(q.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn a_holder_whose_mutex_is_cut_by_a_truncation_lets_go_and_takes_it_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder_taking_it_again(&path);
        // Cut inside the mutex, without a fault: its futex word and kind still name the
        // holder, the links glibc's unlock would follow (from byte 24 of the mutex, on x86-64)
        // are zeros.
        truncate(&path, (offset_of!(Shared, mutex) + 24) as u64);
        took_it_again(let_go(child));
        let mut q = Queue::open(&path).unwrap();
        assert!(q.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn a_holder_whose_file_was_made_anew_lets_go_without_touching_the_new_mutex() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder(&path);
        truncate(&path, 0);
        let mut a = Queue::open(&path).unwrap();
        let held = a.enter(Some(Duration::ZERO));
        assert!(held.is_some(), "a new mutex, free");
        // The old holder unlocks what is now the new mutex, held by us.
        took_it_again(let_go(child));
        let mut b = Queue::open(&path).unwrap();
        assert!(b.enter(None).is_none(), "still ours");
        drop(held);
        assert!(b.enter(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn waiters_on_a_queue_whose_file_is_truncated_wait_no_longer_than_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder(&path);
        let bound = Duration::from_millis(600);
        let waited: Vec<Duration> = std::thread::scope(|s| {
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let path = &path;
                    s.spawn(move || {
                        let mut q = Queue::open(path).unwrap();
                        let t = Instant::now();
                        drop(q.enter(Some(bound)));
                        t.elapsed()
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(100));
            truncate(&path, 0);
            waiters.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for w in &waited {
            assert!(*w < bound + Duration::from_millis(400), "waited {w:?}");
        }
        took_it_again(let_go(child));
        let mut q = Queue::open(&path).unwrap();
        assert!(q.enter(Some(Duration::ZERO)).is_some(), "works again");
    }

    #[test]
    fn an_older_builds_mutex_is_left_as_it_is_when_its_file_is_extended() {
        let dir = tempfile::tempdir().unwrap();
        let (path, old) = queue_in(&dir);
        let old_mutex = old.shared().old_mutex.get();
        // SAFETY: initialised with the file; locked and unlocked by this thread, as a process
        // of an older build would.
        assert_eq!(unsafe { libc::pthread_mutex_trylock(old_mutex) }, 0);
        // An older build's file (64 bytes), its mutex held.
        truncate(&path, 64);
        let mut q = Queue::open(&path).unwrap();
        assert!(
            q.enter(Some(Duration::ZERO)).is_some(),
            "this build's own mutex"
        );
        let old_mutex = old_mutex as usize;
        let busy = std::thread::spawn(move || {
            // SAFETY: a trylock of a mutex of our mapping, from another thread.
            unsafe { libc::pthread_mutex_trylock(old_mutex as *mut libc::pthread_mutex_t) }
        });
        assert_eq!(busy.join().unwrap(), libc::EBUSY, "still held");
        // SAFETY: locked by this thread above.
        assert_eq!(
            unsafe { libc::pthread_mutex_unlock(old_mutex as *mut _) },
            0
        );
    }

    #[test]
    fn a_file_of_an_older_build_gets_a_robust_mutex_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        // An older build's file (64 bytes): a magic, zeros after it.
        let mut bytes = vec![0u8; 64];
        bytes[..8].copy_from_slice(&MAGIC.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut q = Queue::open(&path).unwrap();
        let mut child = holder(&path);
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
        // Robust: handed on at once (a zero mutex would stay locked by the dead holder).
        assert!(q.enter(Some(Duration::from_secs(2))).is_some());
    }

    /// Not run by default (seconds of two CPUs): two processes taking and letting go of the
    /// queue in a tight loop while this one truncates its file every 200 us, to
    /// `RL_STRESS_LEN` bytes (0; 8: the mutex zeroed without a fault; inside the mutex),
    /// holding it `RL_STRESS_HOLD_US` (0), for `RL_STRESS_SECS` (5). Neither may die. The
    /// README's figures: `cargo test --release --no-default-features --lib stress -- --ignored`.
    #[test]
    #[ignore = "a stress run of several seconds; see its doc"]
    fn stress_truncations_under_a_tight_loop_kill_no_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        drop(Queue::open(&path).unwrap());
        let env = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        let len = env("RL_STRESS_LEN", 0);
        let hold = Duration::from_micros(env("RL_STRESS_HOLD_US", 0));
        let secs = Duration::from_secs(env("RL_STRESS_SECS", 5));
        let spin = |d: Duration| {
            let t = Instant::now();
            while t.elapsed() < d {}
        };
        let kids: Vec<libc::pid_t> = (0..2)
            .map(|_| {
                // SAFETY: the child only runs this loop (the queue's calls) and leaves with
                // _exit; the test harness's other threads are not used in it.
                let pid = unsafe { libc::fork() };
                assert!(pid >= 0);
                if pid == 0 {
                    let end = Instant::now() + secs;
                    let mut q = Queue::open(&path).unwrap();
                    while Instant::now() < end {
                        if q.is_stale() {
                            drop(q);
                            q = loop {
                                if let Ok(q) = Queue::open(&path) {
                                    break q;
                                }
                            };
                        }
                        if let Some(held) = q.enter(Some(Duration::from_millis(5))) {
                            spin(hold);
                            drop(held);
                        }
                        spin(hold);
                    }
                    // SAFETY: ends the child at once.
                    unsafe { libc::_exit(0) };
                }
                pid
            })
            .collect();
        let (end, mut truncations) = (Instant::now() + secs, 0);
        while Instant::now() < end {
            truncate(&path, len);
            truncations += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        for pid in kids {
            let mut status = 0;
            // SAFETY: waits for our own child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            eprintln!(
                "{truncations} truncations to {len} bytes: child {pid} wait status {status:#x}"
            );
            assert!(
                libc::WIFEXITED(status),
                "child {pid} killed: wait status {status:#x}"
            );
        }
    }
}
