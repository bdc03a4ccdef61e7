--TEST--
ratelimit_metrics(): the counters and gauges of ratelimit_stats() as Prometheus text 0.0.4, no subject in it
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

ratelimit_acquire('metrics-subject-a', 2, 60);
ratelimit_acquire('metrics-subject-a', 2, 60);
ratelimit_acquire('metrics-subject-a', 2, 60);           // rate
$l = ratelimit_acquire('metrics-subject-b', 5, 60, 1);
ratelimit_acquire('metrics-subject-b', 5, 60, 1);        // inflight
$text = ratelimit_metrics();
$s = ratelimit_stats();

echo "ends with a line feed: ", var_export(str_ends_with($text, "\n"), true), "\n";
$samples = [];
$families = [];
foreach (explode("\n", rtrim($text, "\n")) as $line) {
    if (preg_match('/^# (HELP|TYPE) (\S+) (.+)$/', $line, $m)) {
        $families[$m[2]][$m[1]] = $m[3];
    } elseif (preg_match('/^([a-z_]+)(\{[^}]*\})? (\d+)$/', $line, $m)) {
        $samples[$m[1] . ($m[2] ?? '')] = (int)$m[3];
    } else {
        echo "unexpected line: $line\n";
    }
}
foreach ($families as $name => $f) {
    echo str_pad($name, 34), " ", $f['TYPE'] ?? '(no TYPE)', isset($f['HELP']) ? '' : ' (no HELP)', "\n";
}
$want = [
    'ratelimit_decisions_total{result="allowed"}' => $s['allowed'],
    'ratelimit_decisions_total{result="rate"}' => $s['denied_rate'],
    'ratelimit_decisions_total{result="inflight"}' => $s['denied_inflight'],
    'ratelimit_decisions_total{result="in_progress"}' => $s['denied_in_progress'],
    'ratelimit_decisions_total{result="unavailable"}' => $s['unavailable'],
    'ratelimit_leases_expired_total' => $s['leases_expired'],
    'ratelimit_evicted_total' => $s['evicted'],
    'ratelimit_clock_regressions_total' => $s['clock_regressions'],
    'ratelimit_keys_migrated_total' => $s['keys_migrated'],
    'ratelimit_reopened_total' => $s['reopened'],
    'ratelimit_storage_errors_total' => $s['storage_errors'],
    'ratelimit_dry_run_denied_total' => $s['dry_run_denied'],
    'ratelimit_retries_total' => $s['retries'],
    'ratelimit_redis_errors_total' => $s['redis_errors'],
    'ratelimit_fallback_switches_total' => $s['fallback_switches'],
    'ratelimit_fallback_decisions_total' => $s['fallback_decisions'],
    'ratelimit_entries' => $s['entries'],
    'ratelimit_live_leases' => $s['live_leases'],
    'ratelimit_breaker_state' => ['closed' => 0, 'half-open' => 1, 'open' => 2][$s['breaker']],
    'ratelimit_stats_partial' => (int)$s['partial'],
];
foreach ($want as $k => $v) {
    echo "$k = ", $samples[$k] ?? '(missing)', $samples[$k] === $v ? '' : " (stats: $v)", "\n";
}
$info = preg_grep('/^ratelimit_info\{/', array_keys($samples));
echo "info: ", implode(' ', $info), " = ", $samples[reset($info)], "\n";
preg_match('/backend="([^"]*)"/', reset($info), $bm);
echo "backend: ", $s['backend'], $bm[1] === $s['backend'] ? ' (as in ratelimit_info)' : " (ratelimit_info: $bm[1])", "\n";
echo "samples: ", count($samples), "\n";
echo "no subject: ", var_export(!str_contains($text, 'metrics-subject'), true), "\n";
rl_throws(fn() => ratelimit_metrics(1));
ratelimit_release($l);
echo "after release: ", preg_match('/^ratelimit_live_leases 0$/m', ratelimit_metrics()), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('metrics');
?>
--EXPECTF--
ends with a line feed: true
ratelimit_info                     gauge
ratelimit_decisions_total          counter
ratelimit_leases_expired_total     counter
ratelimit_evicted_total            counter
ratelimit_clock_regressions_total  counter
ratelimit_keys_migrated_total      counter
ratelimit_reopened_total           counter
ratelimit_storage_errors_total     counter
ratelimit_dry_run_denied_total     counter
ratelimit_retries_total            counter
ratelimit_redis_errors_total       counter
ratelimit_fallback_switches_total  counter
ratelimit_fallback_decisions_total counter
ratelimit_entries                  gauge
ratelimit_live_leases              gauge
ratelimit_breaker_state            gauge
ratelimit_stats_partial            gauge
ratelimit_decisions_total{result="allowed"} = 3
ratelimit_decisions_total{result="rate"} = 1
ratelimit_decisions_total{result="inflight"} = 1
ratelimit_decisions_total{result="in_progress"} = 0
ratelimit_decisions_total{result="unavailable"} = 0
ratelimit_leases_expired_total = 0
ratelimit_evicted_total = 0
ratelimit_clock_regressions_total = 0
ratelimit_keys_migrated_total = 0
ratelimit_reopened_total = 0
ratelimit_storage_errors_total = 0
ratelimit_dry_run_denied_total = 0
ratelimit_retries_total = 0
ratelimit_redis_errors_total = 0
ratelimit_fallback_switches_total = 0
ratelimit_fallback_decisions_total = 0
ratelimit_entries = 2
ratelimit_live_leases = 1
ratelimit_breaker_state = 0
ratelimit_stats_partial = 0
info: ratelimit_info{backend="%s",version="%d.%d.%d"} = 1
backend: %s (as in ratelimit_info)
samples: 21
no subject: true
ArgumentCountError: ratelimit_metrics() expects exactly 0 arguments, 1 given
after release: 1
