//! The operations log: each event an operator must know becomes one line of PHP's error log,
//! at most one line per kind of event per process every ten seconds, with the path (or address)
//! and how many times it happened since the last line. Never a subject: the texts are made
//! here from a kind and a path only.

use std::sync::{Arc, Mutex, PoisonError};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    StorageUnavailable,
    StorageRecovered,
    TableFull,
    KeyChanged,
    KeysMigrating,
    Reopened,
    CorruptMovedAside,
    FailOpenAdmitting,
    BreakerOpened,
    BreakerClosed,
    FallbackSwitched,
    HostClock,
    QueueUnusable,
    KeyRestored,
    StateFileDamaged,
    HeldOverflow,
}

const KINDS: usize = 16;

impl Event {
    /// Every event, in the order docs/operations.md lists them.
    pub const ALL: [Event; KINDS] = [
        Event::StorageUnavailable,
        Event::StorageRecovered,
        Event::FailOpenAdmitting,
        Event::BreakerOpened,
        Event::FallbackSwitched,
        Event::BreakerClosed,
        Event::TableFull,
        Event::Reopened,
        Event::CorruptMovedAside,
        Event::QueueUnusable,
        Event::StateFileDamaged,
        Event::KeyChanged,
        Event::KeysMigrating,
        Event::KeyRestored,
        Event::HostClock,
        Event::HeldOverflow,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// When it is written and what the operator does about it (Markdown, for the reference).
    pub fn doc(self) -> &'static str {
        match self {
            Event::StorageUnavailable => "a fault of the storage itself (disk full, read-only, I/O error, a corrupt file or a damaged Redis value) met while deciding: the call is \"unavailable\", counted as `storage_errors`. Free the space, remount, or let the file be rebuilt",
            Event::StorageRecovered => "the first step that succeeds after such a fault: decisions are made again",
            Event::FailOpenAdmitting => "an \"unavailable\" decision allowed because `ratelimit.fail_open=1`: requests pass unlimited",
            Event::BreakerOpened => "`redis_breaker_failures` Redis failures within the window, with `redis_fallback = none`: every worker of the host stops asking Redis for `redis_breaker_retry_ms`, its calls \"unavailable\"",
            Event::FallbackSwitched => "the same opening with `redis_fallback = local`: the host's SQLite file decides (per host) until a probe succeeds; counted as `fallback_switches`",
            Event::BreakerClosed => "the host's one probe (always a decision) succeeded: Redis decides again",
            Event::TableFull => "SQLite held `ratelimit.max_entries` buckets and dropped one that still held information (counted as `evicted`): raise `max_entries`",
            Event::Reopened => "the database file was removed, renamed or replaced: each process opens the path anew (counted as `reopened`)",
            Event::CorruptMovedAside => "a corrupt database moved to `<db_path>.corrupt-<unix time>` and rebuilt: the buckets start afresh",
            Event::QueueUnusable => "the write queue `<db_path>.queue` cannot be used (not ours, say): writers wait by polling SQLite's lock, which is slower under contention; the deny cache caches nothing",
            Event::KeyChanged => "this process now decides with a new key (its key file was replaced, or a rotation): clients it meets start afresh unless `key_file_previous` is set",
            Event::KeysMigrating => "a key rotation is moving buckets from the previous key (counted as `keys_migrated`)",
            Event::KeyRestored => "the store had lost its key record and another host recorded its own key: the settled key was recorded again over it",
            Event::HostClock => "the Redis server refuses `TIME` in scripts: each host's clock decides, and the hosts' clocks must agree (NTP)",
            Event::StateFileDamaged => "`<db_path>.queue` or `<db_path>.breaker` was truncated, replaced or damaged under this process (a `copytruncate` log rotation over the directory, say): that call went without it, the next opens it anew; no decision was affected. Keep log rotation away from the database's directory",
            Event::HeldOverflow => "a request (a long-running worker that never ends one: call `ratelimit_end_request()`) held more than 1024 leases: the oldest was let go of unreleased and ends at its release or `ratelimit.lease_ttl`",
        }
    }

    /// The line it writes, with `<place>` for the path or address, as docs/operations.md
    /// shows it.
    pub fn line(self) -> String {
        format!(
            "ratelimit: {} (<place>[; N times since the last line])",
            self.text()
        )
    }

    fn text(self) -> &'static str {
        match self {
            Event::StorageUnavailable => "storage unavailable, deciding \"unavailable\"",
            Event::StorageRecovered => "storage available again",
            Event::TableFull => "table full (ratelimit.max_entries), evicting buckets",
            Event::KeyChanged => "key changed, now deciding with the new key",
            Event::KeysMigrating => "key rotation: moving buckets from the previous key",
            Event::Reopened => "database file removed or replaced, opened the path anew",
            Event::CorruptMovedAside => "database corrupt, moved aside and rebuilt",
            Event::FailOpenAdmitting => "ratelimit.fail_open admitting \"unavailable\" decisions",
            Event::HostClock => {
                "the server refuses TIME in scripts, deciding with this host's clock"
            }
            Event::BreakerOpened => {
                "primary store failing, host breaker open: not asking it for redis_breaker_retry_ms"
            }
            Event::QueueUnusable => {
                "the write queue beside the database cannot be used, waiting by polling"
            }
            Event::StateFileDamaged => {
                "state file truncated or damaged under this process, going without it and opening it anew"
            }
            Event::BreakerClosed => "primary store answering again, host breaker closed",
            Event::FallbackSwitched => {
                "primary store unavailable, deciding with the local fallback"
            }
            Event::KeyRestored => {
                "key recorded again over a younger key that another host recorded after the store had lost ours"
            }
            Event::HeldOverflow => {
                "a request holds too many leases, the oldest is left to ratelimit.lease_ttl (a long-running worker should call ratelimit_end_request() after each request)"
            }
        }
    }
}

/// The reference of the operations log (Markdown), as docs/operations.md holds it between its
/// markers.
pub fn reference_markdown() -> String {
    let mut out = String::from("| line | when |\n| --- | --- |\n");
    for e in Event::ALL {
        out.push_str(&format!("| `{}` | {} |\n", e.line(), e.doc()));
    }
    out
}

/// Lines at most this often per kind.
pub const INTERVAL_MS: i64 = 10_000;

/// Which events to write now: pure, time passed in.
#[derive(Debug, Default)]
pub struct Throttle {
    /// Per kind: when its last line was written, and how many came since.
    kinds: [(Option<i64>, u64); KINDS],
}

impl Throttle {
    /// Notes one event at `now`; returns how many to report (this one included) when a line
    /// is due, None when it is counted for the next line.
    pub fn note(&mut self, e: Event, now: i64) -> Option<u64> {
        let (last, since) = &mut self.kinds[e.index()];
        *since += 1;
        match *last {
            Some(t) if now.saturating_sub(t) < INTERVAL_MS && now >= t => None,
            _ => {
                *last = Some(now);
                Some(std::mem::take(since))
            }
        }
    }
}

/// Where lines go (the PHP glue: PHP's error log), with the clock.
pub struct OpsLog {
    sink: Box<dyn Fn(&str) + Send + Sync>,
    clock: crate::storage::Clock,
    throttle: Mutex<Throttle>,
}

impl OpsLog {
    pub fn new(
        sink: impl Fn(&str) + Send + Sync + 'static,
        clock: crate::storage::Clock,
    ) -> Arc<Self> {
        Arc::new(Self {
            sink: Box::new(sink),
            clock,
            throttle: Mutex::new(Throttle::default()),
        })
    }

    /// A log that writes nothing.
    pub fn none() -> Arc<Self> {
        Self::new(|_| {}, crate::storage::system_clock())
    }

    /// Notes `event` about `place` (a path or an address).
    pub fn note(&self, event: Event, place: &str) {
        let now = (self.clock)();
        let due = self
            .throttle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(event, now);
        if let Some(n) = due {
            let times = if n == 1 {
                String::new()
            } else {
                format!("; {n} times since the last line")
            };
            (self.sink)(&format!("ratelimit: {} ({place}{times})", event.text()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_is_listed_once() {
        let mut seen = [false; KINDS];
        for e in Event::ALL {
            assert!(!seen[e.index()], "{e:?} twice");
            seen[e.index()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn the_first_event_of_a_kind_is_written_at_once() {
        let mut t = Throttle::default();
        assert_eq!(t.note(Event::Reopened, 1_000), Some(1));
        assert_eq!(t.note(Event::TableFull, 1_001), Some(1), "kinds are apart");
    }

    #[test]
    fn later_ones_wait_ten_seconds_and_are_counted() {
        let mut t = Throttle::default();
        t.note(Event::StorageUnavailable, 0);
        for now in [1, 500, 9_999] {
            assert_eq!(t.note(Event::StorageUnavailable, now), None);
        }
        assert_eq!(t.note(Event::StorageUnavailable, 10_000), Some(4));
        assert_eq!(t.note(Event::StorageUnavailable, 10_001), None);
    }

    #[test]
    fn a_clock_stepping_back_does_not_silence_a_kind() {
        let mut t = Throttle::default();
        t.note(Event::Reopened, 50_000);
        assert_eq!(t.note(Event::Reopened, 1_000), Some(1));
    }

    #[test]
    fn a_line_names_the_place_and_the_count() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let now = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let log = {
            let (lines, now) = (Arc::clone(&lines), Arc::clone(&now));
            OpsLog::new(
                move |l| lines.lock().unwrap().push(l.to_string()),
                Arc::new(move || now.load(std::sync::atomic::Ordering::SeqCst)),
            )
        };
        log.note(Event::Reopened, "/db");
        log.note(Event::Reopened, "/db");
        now.store(10_000, std::sync::atomic::Ordering::SeqCst);
        log.note(Event::Reopened, "/db");
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].ends_with("(/db)"), "{lines:?}");
        assert!(
            lines[1].ends_with("(/db; 2 times since the last line)"),
            "{lines:?}"
        );
    }
}
