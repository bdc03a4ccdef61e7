--TEST--
A Redis whose maxmemory-policy evicts keys (volatile-* too: every bucket has a time to live) would silently reset limits under memory pressure: every call is a RateLimit\Exception naming the setting, never "unavailable" (which fail_open=1 admits), unless ratelimit.redis_allow_eviction=1 accepts it
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/../_helpers.inc'; if (rl_backend() !== 'redis') die('skip the Redis backend only (runs with RL_TEST_BACKEND=redis)'); ?>
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_isolate();
$sock = "$dir/evicting.sock";
$server = proc_open(['redis-server', '--port', '0', '--unixsocket', $sock, '--save', '', '--appendonly', 'no',
    '--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
for ($i = 0; $i < 500 && !file_exists($sock); $i++) usleep(10000);
echo "server up: ", var_export(file_exists($sock), true), "\n";
$code = '$n = ["admitted" => 0, "unavailable" => 0, "denied" => 0, "exception" => 0]; $m = "";'
    . ' for ($i = 0; $i < 8; $i++) { try { $d = ratelimit_acquire("x", 5, 60);'
    . ' $n[$d->reason === "unavailable" ? "unavailable" : ($d->allowed ? "admitted" : "denied")]++; }'
    . ' catch (RateLimit\Exception $e) { $n["exception"]++; $m = $e->getMessage(); } }'
    . ' echo json_encode($n), "\n", $m, "\n";';
$r = rl_run(['ratelimit.redis_url' => "unix://$sock", 'ratelimit.fail_open' => '1'], $code);
[$counts, $msg] = explode("\n", $r['out']) + ['', ''];
echo "refused: $counts; names the setting: ", var_export(str_contains($msg, 'maxmemory-policy is allkeys-lru') && str_contains($msg, 'ratelimit.redis_allow_eviction'), true), "\n";
$r = rl_run(['ratelimit.redis_url' => "unix://$sock", 'ratelimit.redis_allow_eviction' => '1'], $code);
echo "accepted by the operator: ", explode("\n", $r['out'])[0], "\n";
proc_terminate($server);
proc_close($server);
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('redis_evicting_server_refused');
?>
--EXPECT--
server up: true
refused: {"admitted":0,"unavailable":0,"denied":0,"exception":8}; names the setting: true
accepted by the operator: {"admitted":5,"unavailable":0,"denied":3,"exception":0}
