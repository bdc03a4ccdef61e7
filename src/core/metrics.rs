//! `ratelimit_metrics()`: the counters and gauges of `ratelimit_stats()` in the Prometheus text
//! exposition format 0.0.4 (`text/plain; version=0.0.4`). Pure: the glue passes the stats in
//! and sends the text out. Labels name a result or the backend, never a subject nor a
//! pseudonym.

use super::breaker::BreakerState;
use super::counters::Stats;
use std::fmt::Write;

/// The content type a scrape endpoint sends with the text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// The exposition text, family by family.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a metric family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        debug_assert!(valid_metric_name(name), "{name}");
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.as_str());
        self
    }

    /// One sample of the family started last.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) -> &mut Self {
        debug_assert!(valid_metric_name(name), "{name}");
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                debug_assert!(valid_label_name(label), "{label}");
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape_label_value(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
        self
    }

    pub fn into_text(self) -> String {
        self.text
    }
}

/// `# HELP` text: a backslash and a line feed escaped.
pub fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A label value: a backslash, a double quote and a line feed escaped.
pub fn escape_label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
pub fn valid_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
pub fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    !s.starts_with("__")
        && c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The counters other than decisions: (metric name, help), each a `_total` counter.
const COUNTERS: [(&str, &str); 11] = [
    (
        "ratelimit_leases_expired_total",
        "Leases that reached ratelimit.lease_ttl without being released.",
    ),
    (
        "ratelimit_evicted_total",
        "Buckets in debt or in use evicted to keep within ratelimit.max_entries.",
    ),
    (
        "ratelimit_clock_regressions_total",
        "Decisions that found the clock behind a bucket's stored time.",
    ),
    (
        "ratelimit_keys_migrated_total",
        "Buckets moved from the previous key's pseudonym to the current one (key rotation).",
    ),
    (
        "ratelimit_reopened_total",
        "Times a process found the database removed or replaced and opened the path anew.",
    ),
    (
        "ratelimit_storage_errors_total",
        "Storage faults met while deciding (disk full, I/O error, read-only, corrupt).",
    ),
    (
        "ratelimit_dry_run_denied_total",
        "Would-be denials admitted in a shadow scope (ratelimit.dry_run).",
    ),
    (
        "ratelimit_retries_total",
        "Replays: retries with a request id answered as a repeat of its earlier admission, taking nothing.",
    ),
    (
        "ratelimit_redis_errors_total",
        "Failed calls to the primary store (Redis) behind the breaker, of any kind.",
    ),
    (
        "ratelimit_fallback_switches_total",
        "Times this host's breaker opened and decisions moved to the local fallback (once per host).",
    ),
    (
        "ratelimit_fallback_decisions_total",
        "Decisions made by the local fallback while the primary store was unavailable.",
    ),
];

/// The breaker gauge's help: its values are those of [`BreakerState::gauge`].
const BREAKER_HELP: &str = "The host's breaker in front of the primary store: 0 closed (or none), 1 half-open (one probe let through), 2 open (the primary is not asked).";

/// Every metric family, in the order they are written: (name, type). docs/operations.md lists them.
pub const NAMES: [(&str, Kind); 17] = [
    ("ratelimit_info", Kind::Gauge),
    ("ratelimit_decisions_total", Kind::Counter),
    (COUNTERS[0].0, Kind::Counter),
    (COUNTERS[1].0, Kind::Counter),
    (COUNTERS[2].0, Kind::Counter),
    (COUNTERS[3].0, Kind::Counter),
    (COUNTERS[4].0, Kind::Counter),
    (COUNTERS[5].0, Kind::Counter),
    (COUNTERS[6].0, Kind::Counter),
    (COUNTERS[7].0, Kind::Counter),
    (COUNTERS[8].0, Kind::Counter),
    (COUNTERS[9].0, Kind::Counter),
    (COUNTERS[10].0, Kind::Counter),
    ("ratelimit_entries", Kind::Gauge),
    ("ratelimit_live_leases", Kind::Gauge),
    ("ratelimit_breaker_state", Kind::Gauge),
    ("ratelimit_stats_partial", Kind::Gauge),
];

/// The partial gauge's help (see [`Stats::partial`]).
const PARTIAL_HELP: &str = "1 while the store cannot be read (Redis down): the counters and the entries and live_leases gauges are then left out, not reset to what one host knows (which a scraper would read as a counter reset).";

/// The host-wide stats as exposition text. `backend` and `version` go into `ratelimit_info`.
/// Partial stats (the store unreadable) give only the info, the breaker and the partial gauge.
pub fn render(stats: &Stats, backend: &str, version: &str) -> String {
    let mut e = Exposition::default();
    e.family(
        "ratelimit_info",
        Kind::Gauge,
        "The extension's version and storage backend (always 1).",
    )
    .sample(
        "ratelimit_info",
        &[("backend", backend), ("version", version)],
        1,
    );
    if !stats.partial {
        counts(&mut e, stats);
    }
    let breaker = stats.breaker.unwrap_or(BreakerState::Closed);
    e.family("ratelimit_breaker_state", Kind::Gauge, BREAKER_HELP)
        .sample("ratelimit_breaker_state", &[], breaker.gauge());
    e.family("ratelimit_stats_partial", Kind::Gauge, PARTIAL_HELP)
        .sample("ratelimit_stats_partial", &[], u64::from(stats.partial));
    e.into_text()
}

/// The counters and the gauges of the store's contents.
fn counts(e: &mut Exposition, stats: &Stats) {
    let c = &stats.counters;
    e.family(
        "ratelimit_decisions_total",
        Kind::Counter,
        "Decisions of ratelimit_acquire(), by result: allowed, denied by rate or inflight, denied as a retry of a request id still in progress, or unavailable (storage busy or faulty).",
    );
    for (result, value) in [
        ("allowed", c.allowed),
        ("rate", c.denied_rate),
        ("inflight", c.denied_inflight),
        ("in_progress", c.denied_in_progress),
        ("unavailable", c.unavailable),
    ] {
        e.sample("ratelimit_decisions_total", &[("result", result)], value);
    }
    let values = [
        c.leases_expired,
        c.evicted,
        c.clock_regressions,
        c.keys_migrated,
        c.reopened,
        c.storage_errors,
        c.dry_run_denied,
        c.retries,
        c.redis_errors,
        c.fallback_switches,
        c.fallback_decisions,
    ];
    for ((name, help), value) in COUNTERS.iter().zip(values) {
        e.family(name, Kind::Counter, help).sample(name, &[], value);
    }
    e.family("ratelimit_entries", Kind::Gauge, "Buckets stored.")
        .sample("ratelimit_entries", &[], stats.entries);
    e.family(
        "ratelimit_live_leases",
        Kind::Gauge,
        "Leases not yet expired nor released.",
    )
    .sample("ratelimit_live_leases", &[], stats.live_leases);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::counters::Counters;

    fn stats() -> Stats {
        Stats {
            counters: Counters {
                allowed: 11,
                denied_rate: 12,
                denied_inflight: 13,
                denied_in_progress: 28,
                unavailable: 14,
                leases_expired: 15,
                evicted: 16,
                clock_regressions: 17,
                keys_migrated: 18,
                reopened: 19,
                storage_errors: 20,
                dry_run_denied: 23,
                retries: 24,
                redis_errors: 25,
                fallback_switches: 26,
                fallback_decisions: 27,
            },
            entries: 21,
            live_leases: 22,
            breaker: Some(BreakerState::Open),
            partial: false,
        }
    }

    /// The samples of `text` as (name with labels, value), comments left out.
    fn samples(text: &str) -> Vec<(String, u64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').expect(l);
                (k.to_string(), v.parse().expect(l))
            })
            .collect()
    }

    #[test]
    fn every_counter_and_gauge_of_the_stats_is_a_sample_with_its_value() {
        let text = render(&stats(), "sqlite", "0.1.0");
        let got = samples(&text);
        let want = [
            ("ratelimit_info{backend=\"sqlite\",version=\"0.1.0\"}", 1),
            ("ratelimit_decisions_total{result=\"allowed\"}", 11),
            ("ratelimit_decisions_total{result=\"rate\"}", 12),
            ("ratelimit_decisions_total{result=\"inflight\"}", 13),
            ("ratelimit_decisions_total{result=\"in_progress\"}", 28),
            ("ratelimit_decisions_total{result=\"unavailable\"}", 14),
            ("ratelimit_leases_expired_total", 15),
            ("ratelimit_evicted_total", 16),
            ("ratelimit_clock_regressions_total", 17),
            ("ratelimit_keys_migrated_total", 18),
            ("ratelimit_reopened_total", 19),
            ("ratelimit_storage_errors_total", 20),
            ("ratelimit_dry_run_denied_total", 23),
            ("ratelimit_retries_total", 24),
            ("ratelimit_redis_errors_total", 25),
            ("ratelimit_fallback_switches_total", 26),
            ("ratelimit_fallback_decisions_total", 27),
            ("ratelimit_entries", 21),
            ("ratelimit_live_leases", 22),
            ("ratelimit_breaker_state", 2),
            ("ratelimit_stats_partial", 0),
        ];
        let want: Vec<(String, u64)> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(got, want);
        assert!(text.ends_with('\n'), "the last line ends with a line feed");
    }

    #[test]
    fn each_family_has_help_then_type_before_its_samples() {
        let text = render(&stats(), "sqlite", "0.1.0");
        let lines: Vec<&str> = text.lines().collect();
        for (name, kind) in NAMES {
            let help = lines
                .iter()
                .position(|l| l.starts_with(&format!("# HELP {name} ")))
                .unwrap_or_else(|| panic!("no HELP for {name}"));
            assert_eq!(lines[help + 1], format!("# TYPE {name} {}", kind.as_str()));
            assert!(
                lines[help + 2].starts_with(name),
                "{name}: {}",
                lines[help + 2]
            );
            assert!(valid_metric_name(name));
            assert_eq!(name.ends_with("_total"), kind == Kind::Counter, "{name}");
        }
        let families = lines.iter().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(families, NAMES.len());
    }

    /// During an outage a scrape shows the open breaker and says the stats are partial; the
    /// counters are left out rather than dropped to one host's (a counter reset to a scraper).
    #[test]
    fn partial_stats_give_the_breaker_and_no_counter() {
        let s = Stats {
            partial: true,
            ..stats()
        };
        let got = samples(&render(&s, "redis", "0.1.0"));
        let want = [
            ("ratelimit_info{backend=\"redis\",version=\"0.1.0\"}", 1),
            ("ratelimit_breaker_state", 2),
            ("ratelimit_stats_partial", 1),
        ];
        let want: Vec<(String, u64)> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_store_without_a_breaker_reports_it_closed() {
        let s = Stats {
            breaker: None,
            ..stats()
        };
        assert!(render(&s, "sqlite", "0.1.0").contains("\nratelimit_breaker_state 0\n"));
        for (state, v) in [
            (BreakerState::Closed, 0),
            (BreakerState::HalfOpen, 1),
            (BreakerState::Open, 2),
        ] {
            let s = Stats {
                breaker: Some(state),
                ..stats()
            };
            let want = format!("\nratelimit_breaker_state {v}\n");
            assert!(render(&s, "redis", "0.1.0").contains(&want), "{state:?}");
        }
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        assert_eq!(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape_help("a\\b\"c\nd"), "a\\\\b\"c\\nd");
        let text = render(&stats(), "we\"ird\\\nname", "1");
        assert!(
            text.contains("ratelimit_info{backend=\"we\\\"ird\\\\\\nname\",version=\"1\"} 1\n"),
            "{text}"
        );
        assert_eq!(
            text.lines().count(),
            render(&stats(), "x", "1").lines().count()
        );
    }

    #[test]
    fn names_are_checked_as_prometheus_defines_them() {
        assert!(valid_metric_name("a:b_c9") && valid_metric_name("_x"));
        assert!(!valid_metric_name("9a") && !valid_metric_name("a-b") && !valid_metric_name(""));
        assert!(valid_label_name("result") && !valid_label_name("__name__"));
        assert!(!valid_label_name("a:b") && !valid_label_name("1a"));
    }

    #[test]
    fn no_label_names_a_subject_or_a_pseudonym() {
        let text = render(&stats(), "sqlite", "0.1.0");
        let labels: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('{'))
            .flat_map(|(_, rest)| rest.split(',').filter_map(|kv| kv.split_once('=')))
            .map(|(k, _)| k.trim_start_matches('{'))
            .collect();
        assert_eq!(
            labels.into_iter().collect::<Vec<_>>(),
            ["backend", "result", "version"]
        );
    }
}
