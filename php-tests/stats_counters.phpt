--TEST--
ratelimit_stats(): the eighteen counters and gauges, host-wide (shared with other processes), the backend, the breaker's state, whether they are partial (false while the store can be read) and, with Redis, the path its decisions take
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$s = ratelimit_stats();
// redis_path: with the Redis backend only, "module" or "script" (php-tests/redis-backend/).
echo "redis_path: ", var_export(ini_get('ratelimit.backend') === 'redis'
    ? in_array($s['redis_path'] ?? null, ['module', 'script'], true) : !array_key_exists('redis_path', $s), true), "\n";
unset($s['redis_path']);
$keys = array_keys($s);
sort($keys);
echo implode(',', $keys), "\n";
echo "backend: ", var_export($s['backend'] === ini_get('ratelimit.backend'), true), ", breaker: {$s['breaker']}, partial: ", var_export($s['partial'], true), "\n";
// The numbers, without the two words and the flag.
function numbers(array $s): array { unset($s['backend'], $s['breaker'], $s['partial'], $s['redis_path']); ksort($s); return $s; }
$n = numbers($s);
echo "all int: ", var_export(count($n) === 18 && array_sum(array_map('is_int', $n)) === 18, true), ", all zero: ", var_export(array_sum($n) === 0, true), "\n";

ratelimit_acquire('a', 2, 60);
ratelimit_acquire('a', 2, 60);
ratelimit_acquire('a', 2, 60);            // denied_rate
$l = ratelimit_acquire('b', 5, 60, 1);
ratelimit_acquire('b', 5, 60, 1);         // denied_inflight
ratelimit_peek('c', 5, 60);              // nothing
foreach (numbers(ratelimit_stats()) as $k => $v) echo "$k=$v\n";

// Denials decided from a snapshot are written by this process's next write, or within a
// second (here: by ratelimit_stats() a second later).
rl_pause(1.1);
ratelimit_stats();
echo "-- another process counts in the same file\n";
$r = rl_run([], 'ratelimit_acquire("a", 2, 60); ratelimit_acquire("z", 2, 60); $s = ratelimit_stats(); unset($s["backend"], $s["breaker"], $s["partial"], $s["redis_path"]); ksort($s); echo json_encode($s), "\n";');
echo trim($r['out']), "\n";
$s = ratelimit_stats();
echo "parent sees: allowed={$s['allowed']} denied_rate={$s['denied_rate']} entries={$s['entries']} live_leases={$s['live_leases']}\n";
ratelimit_release($l);
echo "after release: live_leases=", ratelimit_stats()['live_leases'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('stats_counters');
?>
--EXPECT--
redis_path: true
allowed,backend,breaker,clock_regressions,denied_in_progress,denied_inflight,denied_rate,dry_run_denied,entries,evicted,fallback_decisions,fallback_switches,keys_migrated,leases_expired,live_leases,partial,redis_errors,reopened,retries,storage_errors,unavailable
backend: true, breaker: closed, partial: false
all int: true, all zero: true
allowed=3
clock_regressions=0
denied_in_progress=0
denied_inflight=1
denied_rate=1
dry_run_denied=0
entries=2
evicted=0
fallback_decisions=0
fallback_switches=0
keys_migrated=0
leases_expired=0
live_leases=1
redis_errors=0
reopened=0
retries=0
storage_errors=0
unavailable=0
-- another process counts in the same file
{"allowed":4,"clock_regressions":0,"denied_in_progress":0,"denied_inflight":1,"denied_rate":2,"dry_run_denied":0,"entries":3,"evicted":0,"fallback_decisions":0,"fallback_switches":0,"keys_migrated":0,"leases_expired":0,"live_leases":1,"redis_errors":0,"reopened":0,"retries":0,"storage_errors":0,"unavailable":0}
parent sees: allowed=4 denied_rate=2 entries=3 live_leases=1
after release: live_leases=0
