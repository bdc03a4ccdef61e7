--TEST--
Operators are never blind: with Redis down and the default redis_fallback=none, ratelimit_stats() answers partial with the breaker open and this worker's counts, ratelimit_metrics() shows the open breaker and the partial flag (no counter dropped to one host's), ratelimit_top() is empty; nothing throws
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/../_helpers.inc'; if (rl_backend() !== 'redis') die('skip the Redis backend only (runs with RL_TEST_BACKEND=redis)'); ?>
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_isolate();
// A port nothing listens on: every call to Redis is refused at once.
$code = 'for ($i = 0; $i < 8; $i++) { $d = ratelimit_acquire("x", 5, 60); }'
    . ' echo $d->reason, "\n";'
    . ' $s = ratelimit_stats();'
    . ' echo json_encode(["partial" => $s["partial"], "breaker" => $s["breaker"], "unavailable" => $s["unavailable"], "redis_errors" => $s["redis_errors"] > 0]), "\n";'
    . ' $m = ratelimit_metrics();'
    . ' echo preg_match("/^ratelimit_breaker_state 2$/m", $m), preg_match("/^ratelimit_stats_partial 1$/m", $m),'
    . ' preg_match("/^ratelimit_decisions_total/m", $m), "\n";'
    . ' echo json_encode(ratelimit_top(5)), "\n";';
$r = rl_run(['ratelimit.redis_url' => 'redis://127.0.0.1:1', 'ratelimit.redis_breaker_failures' => '3'], $code);
echo $r['out'];
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('stats_during_outage');
?>
--EXPECT--
unavailable
{"partial":true,"breaker":"open","unavailable":8,"redis_errors":true}
110
[]
