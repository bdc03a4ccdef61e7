"""Parses ratelimit_metrics() with prometheus_client's own parser and compares it with
ratelimit_stats() of the same moment (php-tests/status/www/pair.php, or a metrics text alone).

    parse_metrics.py PAIR.json          metrics text, stats and top of one request
    parse_metrics.py --text FILE        only: is FILE accepted, with the documented families

Prints one line of figures; exits 1 with the reason on the first mismatch."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

# (family name as prometheus_client reports it, type): counters lose their "_total".
FAMILIES = [
    ("ratelimit_info", "gauge"),
    ("ratelimit_decisions", "counter"),
    ("ratelimit_leases_expired", "counter"),
    ("ratelimit_evicted", "counter"),
    ("ratelimit_clock_regressions", "counter"),
    ("ratelimit_keys_migrated", "counter"),
    ("ratelimit_reopened", "counter"),
    ("ratelimit_storage_errors", "counter"),
    ("ratelimit_dry_run_denied", "counter"),
    ("ratelimit_retries", "counter"),
    ("ratelimit_redis_errors", "counter"),
    ("ratelimit_fallback_switches", "counter"),
    ("ratelimit_fallback_decisions", "counter"),
    ("ratelimit_entries", "gauge"),
    ("ratelimit_live_leases", "gauge"),
    ("ratelimit_breaker_state", "gauge"),
    ("ratelimit_stats_partial", "gauge"),
]

# Each key of ratelimit_stats(): (sample name, labels).
SAMPLES = {
    "allowed": ("ratelimit_decisions_total", {"result": "allowed"}),
    "denied_rate": ("ratelimit_decisions_total", {"result": "rate"}),
    "denied_inflight": ("ratelimit_decisions_total", {"result": "inflight"}),
    "denied_in_progress": ("ratelimit_decisions_total", {"result": "in_progress"}),
    "unavailable": ("ratelimit_decisions_total", {"result": "unavailable"}),
    "leases_expired": ("ratelimit_leases_expired_total", {}),
    "evicted": ("ratelimit_evicted_total", {}),
    "clock_regressions": ("ratelimit_clock_regressions_total", {}),
    "keys_migrated": ("ratelimit_keys_migrated_total", {}),
    "reopened": ("ratelimit_reopened_total", {}),
    "storage_errors": ("ratelimit_storage_errors_total", {}),
    "dry_run_denied": ("ratelimit_dry_run_denied_total", {}),
    "retries": ("ratelimit_retries_total", {}),
    "redis_errors": ("ratelimit_redis_errors_total", {}),
    "fallback_switches": ("ratelimit_fallback_switches_total", {}),
    "fallback_decisions": ("ratelimit_fallback_decisions_total", {}),
    "entries": ("ratelimit_entries", {}),
    "live_leases": ("ratelimit_live_leases", {}),
}

# The keys of ratelimit_stats() that are not numbers: two words and a flag, and with Redis a
# third word (redis_path: "module" or "script", which no metric carries).
WORDS = ["backend", "breaker", "partial"]
REDIS_WORDS = ["redis_path"]
BREAKER = {"closed": 0, "half-open": 1, "open": 2}


def fail(why):
    print(why)
    sys.exit(1)


def parse(text):
    families = list(text_string_to_metric_families(text))
    got = [(f.name, f.type) for f in families]
    if got != FAMILIES:
        fail(f"families {got}, want {FAMILIES}")
    for f in families:
        if not f.documentation:
            fail(f"{f.name} has no HELP")
    samples = {}
    for f in families:
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return families, samples


def main():
    if sys.argv[1] == "--text":
        with open(sys.argv[2], encoding="utf-8") as fh:
            families, samples = parse(fh.read())
        print(f"{len(families)} families, {len(samples)} samples, each with HELP and TYPE")
        return
    with open(sys.argv[1], encoding="utf-8") as fh:
        pair = json.load(fh)
    text, stats, top = pair["metrics"], pair["stats"], pair["top"]
    families, samples = parse(text)
    words = WORDS + (REDIS_WORDS if stats.get("backend") == "redis" else [])
    if sorted(stats) != sorted(list(SAMPLES) + words):
        fail(f"stats keys {sorted(stats)}")
    for key, (name, labels) in SAMPLES.items():
        value = samples.get((name, tuple(sorted(labels.items()))))
        if value != stats[key]:
            fail(f"{key}: metrics {value}, ratelimit_stats() {stats[key]}")
    info = [ls for (n, ls) in samples if n == "ratelimit_info"]
    if [dict(ls).get("backend") for ls in info] != [stats["backend"]]:
        fail(f"backend: metrics {info}, ratelimit_stats() {stats['backend']!r}")
    breaker = samples.get(("ratelimit_breaker_state", ()))
    if breaker != BREAKER.get(stats["breaker"]):
        fail(f"breaker: metrics {breaker}, ratelimit_stats() {stats['breaker']!r}")
    partial = samples.get(("ratelimit_stats_partial", ()))
    if partial != int(stats["partial"]):
        fail(f"partial: metrics {partial}, ratelimit_stats() {stats['partial']!r}")
    labels = {k for (_, ls) in samples for (k, _) in ls}
    if labels != {"backend", "version", "result"}:
        fail(f"label names {sorted(labels)}")
    values = {v for (_, ls) in samples for (_, v) in ls}
    for b in top:
        if b["pseudonym"] in text:
            fail("a pseudonym is in the metrics")
    for subject in sys.argv[2:]:
        if subject in text:
            fail(f"subject {subject!r} is in the metrics")
    print(
        f"{len(families)} families, {len(samples)} samples equal to ratelimit_stats() "
        f"(allowed {stats['allowed']}, rate {stats['denied_rate']}, inflight {stats['denied_inflight']}, "
        f"entries {stats['entries']}); label values {sorted(values)}; none of {len(top)} pseudonyms "
        f"nor {len(sys.argv) - 2} subjects in it"
    )


main()
