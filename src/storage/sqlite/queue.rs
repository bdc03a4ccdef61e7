//! The host's write queue: a robust, process-shared mutex in a small file beside the database
//! (`<db_path>.queue`, mmap'd), taken before `BEGIN IMMEDIATE`.
//!
//! **Why.** SQLite's write lock is a POSIX lock that a waiter can only poll (our busy handler
//! sleeps and retries, see [`super::busy`]). With more FPM workers than cores, pollers wake to
//! find the lock still taken and steal CPU from its holder. A futex queues waiters in the
//! kernel instead: each sleeps until the holder unlocks, and then exactly one wakes. Measured
//! with 8 processes admitting on one subject on 2 cores (README, "Speed"): p99 62-107 us
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
//! The wait is timed on `CLOCK_MONOTONIC` (`pthread_mutex_clocklock`, glibc 2.30 and later):
//! a wall clock set back must not lengthen it.
//!
//! **A file truncated, re-initialised or damaged under us.** Truncated to 0, the file's page
//! faults, and the SIGBUS handler ([`super::super::sigbus`]) gives this process private zeros
//! instead (the mapping is *poisoned*); truncated to a few bytes, the rest of its page is
//! zeroed under every mapping without a fault; a process that opens it next extends it and
//! initialises a new mutex in it, under the mappings of the others. So each open notes the
//! file's `nonce` (random, written last by the init that made the mutex, zeroed first by the
//! next, and last in the layout, so that any truncation zeroes it), and the mutex and the count
//! of refills are used only while the mapping is not poisoned and the nonce is still the one
//! noted. Otherwise the queue is *stale*: the call goes on to SQLite's lock, and the caller opens
//! the file anew (which initialises it again when needed) on its next call.

use super::super::statefile::{self, Mapping, SharedLayout};
use super::super::StoreError;
use std::cell::UnsafeCell;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "RLQUEUE1": this layout, written when the mutex is initialised (before the nonce).
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
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    /// Bumped after every commit that gave a bucket tokens back other than by refill (a reset,
    /// an eviction): each process's deny cache forgets its denials when it moves. After the
    /// mutex, so that a file made by an older build (shorter, extended with zeros) keeps its
    /// layout.
    refills: AtomicU64,
    /// Random and never 0 once the file is ready; zeroed first and written last by each init
    /// (see the module doc). Last, so that a truncation to any length zeroes it.
    nonce: AtomicU64,
}

/// A file at least this long when opened kept its mutex whole (a truncation zeroes what lies
/// beyond the new end).
const MUTEX_END: u64 = (offset_of!(Shared, mutex) + size_of::<libc::pthread_mutex_t>()) as u64;
/// The mutex read as words (to tell one that was zeroed).
const MUTEX_WORDS: usize = size_of::<libc::pthread_mutex_t>() / 8;
const _: () = assert!(
    size_of::<libc::pthread_mutex_t>().is_multiple_of(8)
        && offset_of!(Shared, mutex).is_multiple_of(8),
    "the mutex is read as 8-byte words"
);

/// How the file is named in errors.
const NOUN: &str = "write queue";

unsafe extern "C" {
    // glibc 2.30+ (Debian 11 on); not yet in the libc crate for every target.
    fn pthread_mutex_clocklock(
        mutex: *mut libc::pthread_mutex_t,
        clock: libc::clockid_t,
        abstime: *const libc::timespec,
    ) -> libc::c_int;
}

// SAFETY: u64 atomics and a pthread mutex: any bytes are a valid value (a mutex that is not
// one is refused by its calls, and is initialised when the magic is wrong), and the mutex is
// only ever touched through the pthread calls made for shared use.
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
pub struct Held<'q>(&'q mut Queue);

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
        let map = Mapping::open(path, NOUN, |shared: &Shared, was| init(shared, was, path))?;
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
        let rc = match within {
            // SAFETY: the mutex was initialised (magic checked at open) in our mapping.
            None => unsafe { libc::pthread_mutex_trylock(mutex) },
            Some(left) => {
                let deadline = monotonic_after(left);
                // SAFETY: as above; `deadline` is a valid timespec.
                unsafe { pthread_mutex_clocklock(mutex, libc::CLOCK_MONOTONIC, &deadline) }
            }
        };
        match rc {
            0 => Some(Held(self)),
            libc::EOWNERDEAD => {
                // Its holder died holding it: nothing it protected needs repair (SQLite's own
                // lock and journal covered the transaction), so it is consistent as it is.
                // SAFETY: we own the mutex now (EOWNERDEAD means it was locked for us).
                unsafe { libc::pthread_mutex_consistent(mutex) };
                Some(Held(self))
            }
            // The file changed under the wait (truncated, initialised anew): not a stuck
            // queue, a stale mapping, opened anew by the next call.
            _ if !self.check() => None,
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
        let q = &mut *self.0;
        // SAFETY (of what follows, with `enter`): the mutex may have been zeroed or replaced
        // under us while we held it, or while we waited for it.
        // - Zeroed by a fault (poisoned: private zeros): left alone. Zeroed in the file (a
        //   truncation to a few bytes) or initialised anew by another process: unlocked as it
        //   is. A zeroed glibc mutex is a plain, unlocked, process-private one: its unlock is an
        //   exchange of a word with no wake-up; a new robust mutex not locked by us answers
        //   EPERM and is not changed. Neither can let anyone in that SQLite's lock would not.
        // - Waits are bounded (half the budget), on whatever the word is; a lock taken on
        //   zeros is "held" by us alone and changes nothing in the file.
        // - glibc links a robust mutex it locks into the thread's robust list (kernel ABI: the
        //   entry lies inside the mutex) and unlinks it in the unlock, reading the links from
        //   the mutex. After an unlock on zeroed or re-initialised memory (or none), the list
        //   still points into this mapping, and the next robust lock of the thread writes
        //   through it: so such a mapping is detached (private zeros, never unmapped) before
        //   this thread can lock again. The kernel reads the list only when the thread dies,
        //   finds zeros there, and stops.
        // - Garbage (no magic) is never handed to glibc: its unlock would follow garbage links.
        // Left: a truncation or init that lands inside glibc's unlock, between its first read
        // of the mutex and its reading of the links (some nanoseconds), makes it write through
        // zeroed links, which kills the worker (SIGSEGV); see the README.
        let s = q.shared();
        if !q.map.poisoned() && s.magic.load(Ordering::Acquire) == MAGIC {
            s.turns.fetch_add(1, Ordering::Relaxed);
            // SAFETY: this process locked it (a Held exists only after a successful lock),
            // and the magic says it is a mutex of ours (see above for one made anew).
            unsafe { libc::pthread_mutex_unlock(s.mutex.get()) };
        }
        if !q.check() {
            q.map.detach();
        }
    }
}

/// Makes the file ready under the opening `flock` (`was`: its length before it was extended),
/// unless it is: a magic and a nonce, written last, say a mutex was made in it and nothing was
/// truncated since.
fn init(shared: &Shared, was: u64, path: &Path) -> Result<(), StoreError> {
    let magic = shared.magic.load(Ordering::Acquire);
    if magic == MAGIC && shared.nonce.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    // Unsealed first: from here on, a process that still maps the file sees a nonce that is
    // not its own and leaves the mutex alone.
    shared.nonce.store(0, Ordering::SeqCst);
    // A file of an older build (no nonce yet) whose mutex is whole is kept as it is: its
    // processes may be holding the mutex now, and a new one made under them would be
    // unlocked by nobody. A mutex of zeros, or one a truncation reached, is made anew.
    let whole = magic == MAGIC && was >= MUTEX_END && !mutex_is_zero(shared);
    if !whole {
        // SAFETY: under the exclusive flock every opener takes, and with the nonce zeroed, so
        // no process of this build locks this mutex now (see Held's drop for one that held
        // it); attr is initialised before use and destroyed after.
        let rc = unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
            let rc = libc::pthread_mutex_init(shared.mutex.get(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            rc
        };
        if rc != 0 {
            let e = std::io::Error::from_raw_os_error(rc);
            return Err(statefile::io_error(NOUN, path, "initialise", e));
        }
        shared.magic.store(MAGIC, Ordering::Release);
    }
    shared.nonce.store(new_nonce(path)?, Ordering::Release);
    Ok(())
}

/// Whether every byte of the mutex is 0 (never a robust, process-shared mutex: its kind is
/// kept in it).
fn mutex_is_zero(shared: &Shared) -> bool {
    let words = shared.mutex.get().cast::<AtomicU64>();
    // SAFETY: the mutex's bytes lie in our live mapping, 8-aligned and a whole number of
    // words (asserted at compile time); read atomically, since other processes may write them.
    (0..MUTEX_WORDS).all(|i| unsafe { (*words.add(i)).load(Ordering::Relaxed) } == 0)
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
            // a write through this thread's robust list into the old place faults, rather than
            // land in the new mapping when the kernel puts it at the same address. (A detached
            // mapping is still there: this fails, and is not needed.)
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
            held.0.shared().turns.fetch_add(1, Ordering::Relaxed);
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

    fn truncate(path: &Path, len: u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap();
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
        // Its unlock faults (the file is empty), on private zeros.
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
        // No fault: the mutex is zeroed under the holder, which unlocks zeros and must not
        // lock a robust mutex again before its mapping is detached.
        truncate(&path, 8);
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
    fn a_file_of_an_older_build_keeps_its_mutex_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        let child = holder(&path);
        // An older build's file: this layout without its nonce, the mutex held.
        truncate(&path, offset_of!(Shared, nonce) as u64);
        let mut q = Queue::open(&path).unwrap();
        assert!(q.enter(None).is_none(), "still held by the other process");
        assert!(!q.is_stale());
        took_it_again(let_go(child));
        assert!(q.enter(Some(Duration::from_secs(5))).is_some());
    }

    #[test]
    fn a_mutex_of_zeros_behind_a_magic_is_made_anew_robust() {
        let dir = tempfile::tempdir().unwrap();
        let path = Queue::path_for(&dir.path().join("rl.sqlite"));
        // A file an older build extended after a truncation: the magic kept, the rest zeros.
        let mut bytes = vec![0u8; offset_of!(Shared, nonce)];
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
}
