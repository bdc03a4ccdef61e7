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
//! The wait is timed on `CLOCK_MONOTONIC` (`pthread_mutex_clocklock`, glibc 2.30 and later):
//! a wall clock set back must not lengthen it.

use super::super::statefile::{self, Mapping, SharedLayout};
use super::super::StoreError;
use std::cell::UnsafeCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "RLQUEUE1": this layout, written last when the mutex is initialised.
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
    /// an eviction): each process's deny cache forgets its denials when it moves. Last, so
    /// that a file made by an older build (shorter, extended with zeros) keeps its layout.
    refills: AtomicU64,
}

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
}

/// The queue held; unlocked when dropped (also when a panic unwinds through the transaction).
/// It borrows the Queue, so the thread that locked the mutex is the one that unlocks it.
pub struct Held<'q>(&'q Queue);

impl Queue {
    /// Where a host's queue lives: beside its database.
    pub fn path_for(db: &Path) -> PathBuf {
        statefile::beside(db, ".queue")
    }

    /// Opens (creating it, mode 0600) and maps the queue at `path` ([`Mapping::open`]: the
    /// trust checks, a file that is not ours refused). A new file (no magic) gets its mutex
    /// initialised under the opening `flock`, so nobody uses it before it is ready.
    pub fn open(path: &Path) -> Result<Queue, StoreError> {
        let map = Mapping::open(path, NOUN, |shared: &Shared| {
            if shared.magic.load(Ordering::Acquire) == MAGIC {
                return Ok(());
            }
            // SAFETY: under the exclusive flock every opener takes, and before the magic is
            // written, so no process uses this mutex yet; attr is initialised before use and
            // destroyed after.
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
            Ok(())
        })?;
        Ok(Queue {
            map,
            skip_until: None,
        })
    }

    /// Whether the path still names the file mapped (false once it was removed or replaced:
    /// then the caller opens it anew, so that every process queues on the same file again).
    pub fn is_current(&self) -> bool {
        self.map.is_current()
    }

    /// Waits for the queue, at most `within` (none: no wait at all). None when the call
    /// goes on without holding it (skipped, unusable, timed out): straight to SQLite's lock.
    pub fn enter(&mut self, within: Option<Duration>) -> Option<Held<'_>> {
        if self.skip_until.is_some_and(|t| Instant::now() < t) {
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

    /// The count of commits that gave tokens back other than by refill (see `Shared`).
    pub fn refills(&self) -> u64 {
        self.shared().refills.load(Ordering::Acquire)
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
        let shared = self.0.shared();
        shared.turns.fetch_add(1, Ordering::Relaxed);
        // SAFETY: this process locked it (a Held exists only after a successful lock).
        unsafe { libc::pthread_mutex_unlock(shared.mutex.get()) };
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
    }

    /// Another process holding the queue at `path` until killed or dropped; returns once it
    /// holds it.
    pub fn holder(path: &Path) -> Child {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "storage::sqlite::queue::tests::child_holds_the_queue",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            if line.unwrap().trim_end() == "held" {
                return child;
            }
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
}
