//! Host names resolved with a bounded wait. The system resolver (`getaddrinfo`) cannot be told a
//! deadline, and a DNS server that does not answer holds it for seconds (about 10 s with glibc's
//! defaults), so it runs on a helper thread and a call waits for it at most until its own
//! deadline. The addresses are kept for the process: a later connect uses them at once, and
//! once they are [`FRESH`] no more, looks them up again in the background while still using
//! them. At most one lookup per name runs at a time: a resolver that hangs costs one thread,
//! never one per call.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long addresses are used before they are looked up again (in the background).
pub const FRESH: Duration = Duration::from_secs(30);

/// What looks a name up: the system's resolver, or a test's.
pub type Resolver = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

fn system(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    (host, port).to_socket_addrs().map(Iterator::collect)
}

/// One lookup on its helper thread: its outcome once known.
#[derive(Default)]
struct Lookup {
    done: Mutex<Option<io::Result<Vec<SocketAddr>>>>,
    ready: Condvar,
}

#[derive(Default)]
struct Entry {
    /// The last addresses found, and when.
    addrs: Option<(Vec<SocketAddr>, Instant)>,
    /// The lookup under way, and the process that started it: a child of `fork` has no copy
    /// of the thread, and must not wait for it.
    pending: Option<(Arc<Lookup>, u32)>,
}

fn table() -> &'static Mutex<HashMap<(String, u16), Entry>> {
    static T: OnceLock<Mutex<HashMap<(String, u16), Entry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The addresses of `host:port`, waiting for a lookup at most until `deadline`.
pub fn resolve(host: &str, port: u16, deadline: Instant) -> io::Result<Vec<SocketAddr>> {
    resolve_with(system, host, port, deadline)
}

/// [`resolve`] with the resolver given.
pub fn resolve_with(
    resolver: Resolver,
    host: &str,
    port: u16,
    deadline: Instant,
) -> io::Result<Vec<SocketAddr>> {
    // An address needs no lookup (nor a thread).
    if let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let lookup = {
        let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
        let e = t.entry((host.to_string(), port)).or_default();
        let pid = std::process::id();
        if e.pending.as_ref().is_some_and(|(_, p)| *p != pid) {
            e.pending = None;
        }
        // A lookup that ended since: its answer replaces what was known (a failure does not
        // erase addresses that worked).
        let ended = e.pending.as_ref().and_then(|(l, _)| {
            let mut done = l.done.lock().unwrap_or_else(|p| p.into_inner());
            done.take()
        });
        match ended {
            Some(Ok(addrs)) if !addrs.is_empty() => {
                e.addrs = Some((addrs, Instant::now()));
                e.pending = None;
            }
            Some(Err(err)) if e.addrs.is_none() => {
                e.pending = None;
                return Err(err);
            }
            Some(_) => e.pending = None,
            None => {}
        }
        if let Some((addrs, at)) = &e.addrs {
            let addrs = addrs.clone();
            if at.elapsed() >= FRESH && e.pending.is_none() {
                e.pending = Some((start(resolver, host, port)?, pid));
            }
            return Ok(addrs);
        }
        match &e.pending {
            Some((l, _)) => Arc::clone(l),
            None => {
                let l = start(resolver, host, port)?;
                e.pending = Some((Arc::clone(&l), pid));
                l
            }
        }
    };
    // Nothing known: wait for the lookup, at most until the deadline. Its answer is taken by
    // whoever comes next (this call included, below).
    let mut done = lookup.done.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if done.is_some() {
            drop(done);
            return resolve_known(host, port);
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(too_slow)?;
        done = lookup
            .ready
            .wait_timeout(done, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// What a lookup that just ended found, taken into the table.
fn resolve_known(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    // `resolve_with` takes an ended lookup's answer before anything else, and never calls the
    // resolver then: the one given does not matter.
    resolve_with(system, host, port, Instant::now() + Duration::from_secs(1))
}

fn too_slow() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the host name was not resolved within the time budget",
    )
}

/// Starts a lookup on a thread of its own.
fn start(resolver: Resolver, host: &str, port: u16) -> io::Result<Arc<Lookup>> {
    let lookup = Arc::new(Lookup::default());
    let theirs = Arc::clone(&lookup);
    let host = host.to_string();
    std::thread::Builder::new()
        .name("ratelimit-dns".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let found = resolver(&host, port);
            *theirs.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
            theirs.ready.notify_all();
        })?;
    Ok(lookup)
}

/// Marks the addresses of `host:port` as due for a new lookup (none of them answered): the
/// next connect still uses them, and looks the name up again in the background.
pub fn stale(host: &str, port: u16) {
    let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(Entry {
        addrs: Some((_, at)),
        ..
    }) = t.get_mut(&(host.to_string(), port))
    {
        if let Some(old) = Instant::now().checked_sub(FRESH) {
            *at = old;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hangs(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        std::thread::sleep(Duration::from_secs(3));
        Ok(vec!["127.0.0.1:1".parse().unwrap()])
    }

    fn quick(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(vec![SocketAddr::from(([127, 0, 0, 9], port))])
    }

    /// A resolver that does not answer (an unresponsive DNS server) holds a call no longer
    /// than its budget, every time, and costs one thread however many calls wait for it.
    #[test]
    fn a_resolver_that_hangs_holds_no_call_past_its_deadline() {
        for _ in 0..5 {
            let t0 = Instant::now();
            let e = resolve_with(hangs, "hangs.invalid", 6379, t0 + Duration::from_millis(50))
                .unwrap_err();
            let took = t0.elapsed();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            // 50 to 51 ms on an idle machine; the resolver answers after 3 s. The margin is
            // for a machine so loaded that the test's thread waits to be scheduled.
            assert!(
                took >= Duration::from_millis(50) && took < Duration::from_millis(150),
                "{took:?}"
            );
        }
        let t = table().lock().unwrap();
        assert!(t[&("hangs.invalid".to_string(), 6379)].pending.is_some());
    }

    #[test]
    fn addresses_found_are_kept_and_an_address_needs_no_lookup() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let a = resolve_with(quick, "quick.invalid", 7000, deadline).unwrap();
        assert_eq!(a, [SocketAddr::from(([127, 0, 0, 9], 7000))]);
        // Kept: a resolver that would hang is not waited for.
        let t0 = Instant::now();
        let b = resolve_with(hangs, "quick.invalid", 7000, deadline).unwrap();
        assert_eq!(a, b);
        assert!(t0.elapsed() < Duration::from_secs(1), "not waited for");
        let c = resolve_with(hangs, "127.0.0.3", 7, deadline).unwrap();
        assert_eq!(c, [SocketAddr::from(([127, 0, 0, 3], 7))]);
        let d = resolve_with(hangs, "[::1]", 7, deadline).unwrap();
        assert_eq!(d, ["[::1]:7".parse().unwrap()]);
    }

    /// Stale addresses are used at once while a new lookup runs in the background.
    #[test]
    fn stale_addresses_are_used_while_looked_up_again() {
        let deadline = Instant::now() + Duration::from_secs(5);
        resolve_with(quick, "stale.invalid", 7001, deadline).unwrap();
        stale("stale.invalid", 7001);
        let t0 = Instant::now();
        let a = resolve_with(
            hangs,
            "stale.invalid",
            7001,
            Instant::now() + Duration::from_millis(50),
        )
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "not waited for");
        assert_eq!(a, [SocketAddr::from(([127, 0, 0, 9], 7001))]);
    }
}
