//! A mapped state file truncated under the process must not kill it.
//!
//! **Why.** An access to a page of a `MAP_SHARED` file mapping that lies beyond the file's end
//! raises SIGBUS, which kills the process. Our state files (`<db>.queue`, `<db>.breaker`) are
//! mapped by every worker of a host, and anyone who may write them can truncate them at any
//! time (`: > file`, `truncate -s 0`, a `copytruncate` log rotation over the directory): a
//! check of the size before each access cannot help, since the truncation can come between the
//! check and the access.
//!
//! **How.** A process-wide SIGBUS handler, installed once, the first time a state file is
//! mapped (stores are opened in workers, never in module startup), and a fixed table of our
//! live mappings. A fault inside one of them replaces that whole mapping in place with private
//! zero pages (`mmap` with `MAP_FIXED`, made as a raw system call, which is async-signal-safe)
//! and marks it poisoned; the faulting instruction then runs again on zeros. Every user asks
//! [`Registration::poisoned`] after its use, goes on without the file for that call and opens
//! it anew on a later one. A fault anywhere else goes to the handler that was there before ours
//! (for the default action: the default is restored and the fault repeats, killing the process
//! as it would have without us).
//!
//! The table and the handler allocate nothing and take no lock: a slot is claimed by a
//! compare-and-swap of its length, published by its start, and freed before its `munmap`.
//!
//! Not covered: a SIGBUS handler installed after ours by some other code, which does not chain
//! to ours; then a truncation kills again, as before. Mappings this module does not know (such
//! as SQLite's `-shm`) are never touched.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Live mappings at most (each store maps one or two files; tests open many stores at once).
const SLOTS: usize = 256;

struct Slot {
    /// First byte of the mapping; 0 when the slot is free or being filled.
    start: AtomicUsize,
    /// Bytes, rounded up to pages; 0 when the slot is free.
    len: AtomicUsize,
    poisoned: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // only as the array's initialiser
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    poisoned: AtomicBool::new(false),
};

static SLOTS_TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// The disposition of SIGBUS before ours, set once before ours is installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// One mapping in the table; freed when dropped (before the caller unmaps the memory).
#[derive(Debug)]
pub struct Registration {
    slot: usize,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Puts the mapping of `len` bytes at `start` (page-aligned, as mmap returns it) under the
/// handler, installing it first if needed. None when the handler cannot be installed or every
/// slot is taken: then the caller must not map the file (a truncation would kill).
pub fn register(start: *mut libc::c_void, len: usize) -> Option<Registration> {
    install();
    if !INSTALLED.load(Ordering::Acquire) || start.is_null() || len == 0 {
        return None;
    }
    let page = page_size();
    let len = len.div_ceil(page) * page;
    for (i, s) in SLOTS_TABLE.iter().enumerate() {
        if s.len
            .compare_exchange(0, len, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.poisoned.store(false, Ordering::Relaxed);
            s.start.store(start as usize, Ordering::Release);
            return Some(Registration { slot: i });
        }
    }
    None
}

impl Registration {
    /// Whether a fault (a truncated file) replaced this mapping with private zeros.
    pub fn poisoned(&self) -> bool {
        SLOTS_TABLE[self.slot].poisoned.load(Ordering::Acquire)
    }

    /// Does now what a fault would: the mapping becomes private zero pages, cut from its file
    /// (see `Mapping::detach`). False if the kernel refused (the mapping is left as it was).
    pub fn poison_now(&self) -> bool {
        let s = &SLOTS_TABLE[self.slot];
        let (start, len) = (
            s.start.load(Ordering::Acquire),
            s.len.load(Ordering::Acquire),
        );
        // SAFETY: the slot is ours (registered, not yet dropped), so [start, start + len) is
        // our live mapping; see `replace`.
        let done = unsafe { replace(start, len) };
        if done {
            s.poisoned.store(true, Ordering::Release);
        }
        done
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let s = &SLOTS_TABLE[self.slot];
        s.start.store(0, Ordering::Release);
        s.len.store(0, Ordering::Release);
    }
}

/// Replaces `[start, start + len)` in place with private, anonymous, zeroed, read-write pages.
/// A raw system call: no errno, no lock, no allocation (async-signal-safe).
///
/// # Safety
/// The range must be a whole mapping of ours that nothing else will unmap meanwhile; its old
/// contents are lost to every reference into it (which is what the callers want: any bytes
/// are a valid value of the layouts stored there, see `statefile::SharedLayout`).
unsafe fn replace(start: usize, len: usize) -> bool {
    let r = libc::syscall(
        libc::SYS_mmap,
        start,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1 as libc::c_int,
        0 as libc::off_t,
    );
    r as usize == start
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with valid pointers; the previous disposition is stored before ours
        // can run, so the handler always finds it.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return;
            }
            let _ = PREVIOUS.set(old);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            if libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) == 0 {
                INSTALLED.store(true, Ordering::Release);
            }
        }
    });
}

/// The slot whose mapping holds `addr`, if any.
fn slot_of(addr: usize) -> Option<(&'static Slot, usize, usize)> {
    SLOTS_TABLE.iter().find_map(|s| {
        let start = s.start.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Acquire);
        // Read start again: a slot freed and claimed anew between the two loads is skipped.
        let same = s.start.load(Ordering::Acquire) == start;
        (start != 0 && same && addr >= start && addr - start < len).then_some((s, start, len))
    })
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; errno is this
    // thread's, saved and restored so that the interrupted code never sees ours.
    unsafe {
        let errno = *libc::__errno_location();
        let addr = (*info).si_addr() as usize;
        // Only a fault the kernel raised (si_code > 0), not a SIGBUS sent by someone.
        if (*info).si_code > 0 {
            if let Some((slot, start, len)) = slot_of(addr) {
                // SAFETY: a registered slot is a live mapping of ours (freed before munmap).
                if replace(start, len) {
                    slot.poisoned.store(true, Ordering::Release);
                    *libc::__errno_location() = errno;
                    return;
                }
            }
        }
        *libc::__errno_location() = errno;
        chain(sig, info, ctx);
    }
}

/// Hands a SIGBUS that is not ours to what was there before us (its own mask and flags other
/// than SA_SIGINFO are not applied: a handler of ours is running, with SIGBUS blocked).
///
/// # Safety
/// Called from the handler only, with its arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let fault = (*info).si_code > 0;
    let (handler, flags) = PREVIOUS
        .get()
        .map_or((libc::SIG_DFL, 0), |p| (p.sa_sigaction, p.sa_flags));
    if handler == libc::SIG_IGN && !fault {
        return;
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // The default action, as the kernel takes it for a fault even when ignored: restore it;
        // the faulting instruction runs again and the fault kills. A signal sent is raised
        // again, delivered once this handler returns.
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        if !fault {
            libc::raise(sig);
        }
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            std::mem::transmute(handler);
        f(sig, info, ctx);
    } else {
        let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    /// An anonymous mapping of `pages` pages (registered by the caller).
    fn anon(pages: usize) -> *mut libc::c_void {
        // SAFETY: a fresh anonymous mapping; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page_size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p
    }

    /// A page of a file mapped shared, NOT registered, and the file truncated to 0 under it:
    /// touching it faults. The file stays open (and its directory) for the mapping's life.
    fn unregistered_truncated_page() -> (*mut u64, tempfile::NamedTempFile) {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(page_size() as u64).unwrap();
        // SAFETY: a fresh shared mapping of a file one page long; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page_size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_file().as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        f.as_file().set_len(0).unwrap();
        (p.cast(), f)
    }

    /// Installs the handler as a state file's first mapping would.
    fn with_handler() {
        let p = anon(1);
        let r = register(p, page_size());
        assert!(r.is_some() && INSTALLED.load(Ordering::Acquire));
        drop(r);
        // SAFETY: our mapping, unregistered, no reference into it left.
        unsafe { libc::munmap(p, page_size()) };
    }

    #[test]
    fn a_freed_slot_is_no_longer_ours() {
        let p = anon(1);
        let r = register(p, 1).unwrap();
        assert_eq!(slot_of(p as usize + 100).map(|s| s.1), Some(p as usize));
        drop(r);
        assert!(slot_of(p as usize + 100).is_none());
        // SAFETY: our mapping, no reference into it left.
        unsafe { libc::munmap(p, page_size()) };
    }

    #[test]
    fn poisoning_now_gives_private_zeros_in_place() {
        let p = anon(2);
        // SAFETY: our mapping of two pages.
        unsafe { *(p as *mut u64).add(600) = 7 };
        let r = register(p, 2 * page_size()).unwrap();
        assert!(!r.poisoned());
        assert!(r.poison_now());
        assert!(r.poisoned());
        // SAFETY: still mapped (replaced in place), now zeros.
        assert_eq!(
            unsafe { std::ptr::read_volatile((p as *const u64).add(600)) },
            0
        );
        drop(r);
        // SAFETY: our mapping, no reference into it left.
        unsafe { libc::munmap(p, 2 * page_size()) };
    }

    /// Forks; the child runs `f` and exits 0 if it returns. The child's wait status.
    fn in_child(f: impl FnOnce()) -> libc::c_int {
        // SAFETY: the child only touches memory and makes raw system calls (no allocation, no
        // lock), then leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            f();
            // SAFETY: ends the child at once, running no destructor of the parent's state.
            unsafe { libc::_exit(0) };
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut status = 0;
        // SAFETY: waits for our own child.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
            if std::time::Instant::now() > deadline {
                // SAFETY: kills and reaps our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                panic!("the child hung (a fault handled again and again?)");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        status
    }

    #[test]
    fn a_fault_outside_our_mappings_goes_to_the_handler_before_ours_and_kills() {
        with_handler();
        let (page, _file) = unregistered_truncated_page();
        // Before ours: the test harness's own (Rust's stack-overflow handler), which restores
        // the default for a fault that is not a stack overflow.
        let status = in_child(|| {
            // SAFETY: faults (the file is empty): what this test is about.
            unsafe { std::ptr::read_volatile(page) };
        });
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "wait status {status:#x}"
        );
    }

    /// Set in a child test process: what it does with the default SIGBUS disposition before
    /// ours ("fault" outside our mappings, or "send" itself a SIGBUS).
    const CHILD_ENV: &str = "RL_TEST_SIGBUS_CHILD";

    /// Not a test of its own: the body of the child process [`default_child`] starts.
    #[test]
    #[ignore = "run by default_child() in a child process"]
    fn child_with_the_default_disposition() {
        let Ok(what) = std::env::var(CHILD_ENV) else {
            return;
        };
        // SAFETY: sets SIGBUS to its default, as in a PHP process (no Rust runtime there).
        unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        with_handler();
        assert_eq!(PREVIOUS.get().map(|p| p.sa_sigaction), Some(libc::SIG_DFL));
        let (page, _file) = unregistered_truncated_page();
        match what.as_str() {
            // SAFETY: faults (the file is empty): what this test is about.
            "fault" => unsafe { std::ptr::read_volatile(page) },
            // SAFETY: raise has no preconditions.
            _ => unsafe { libc::raise(libc::SIGBUS) as u64 },
        };
        // Alive: the parent sees exit 0 and fails.
    }

    /// How a fresh test process with the default SIGBUS disposition before ours ended.
    fn default_child(what: &str) -> std::process::ExitStatus {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "storage::sigbus::tests::child_with_the_default_disposition",
                "--include-ignored",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, what)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child hung (a fault handled again and again?)");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn with_the_default_disposition_before_ours_a_fault_outside_our_mappings_kills() {
        assert_eq!(default_child("fault").signal(), Some(libc::SIGBUS));
    }

    #[test]
    fn with_the_default_disposition_before_ours_a_sigbus_sent_kills() {
        assert_eq!(default_child("send").signal(), Some(libc::SIGBUS));
    }
}
