--TEST--
ratelimit_stats()['redis_path'] says how decisions reach Redis: "module" on a server started with --loadmodule libratelimit_redis.so (the native commands, detected at connect), "script" on one without; both admit exactly the limit, under every policy
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/../_helpers.inc'; if (rl_backend() !== 'redis') die('skip the Redis backend only (runs with RL_TEST_BACKEND=redis)');
$root = dirname(__DIR__, 2);
$so = getenv('RL_REDIS_MODULE_SO') ?: (is_file("$root/target/release/libratelimit_redis.so") ? "$root/target/release/libratelimit_redis.so" : "$root/target/debug/libratelimit_redis.so");
if (!is_file($so)) die("skip no $so: cargo build -p ratelimit-redis (./run-tests level 1 builds it)"); ?>
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_isolate();
$root = dirname(__DIR__, 2);
$so = getenv('RL_REDIS_MODULE_SO') ?: (is_file("$root/target/release/libratelimit_redis.so") ? "$root/target/release/libratelimit_redis.so" : "$root/target/debug/libratelimit_redis.so");
$servers = [];
foreach (['module' => ['--loadmodule', $so], 'plain' => []] as $name => $extra) {
    $sock = "$dir/$name.sock";
    $servers[] = proc_open(array_merge(['redis-server', '--port', '0', '--unixsocket', $sock, '--save', '', '--appendonly', 'no'], $extra),
        [1 => ['file', "$dir/$name.log", 'w'], 2 => ['file', "$dir/$name.log", 'a']], $pipes);
    for ($i = 0; $i < 500 && !file_exists($sock); $i++) usleep(10000);
    echo "$name server up: ", var_export(file_exists($sock), true), "\n";
}
$code = '$n = 0; for ($i = 0; $i < 8; $i++) { $n += (int) ratelimit_acquire("x", 5, 60)->allowed; }'
    // The windows too (the module computes every policy).
    . ' foreach (["fixed_window", "sliding_window"] as $p) { $w = 0;'
    . ' for ($i = 0; $i < 5; $i++) { $w += (int) ratelimit_acquire("w", 3, 60, scope: $p, policy: $p)->allowed; }'
    . ' echo "$p $w of 5, "; }'
    . ' echo $n, " admitted of 8, redis_path ", ratelimit_stats()["redis_path"], "\n";';
foreach (['module', 'plain'] as $name) {
    $r = rl_run(['ratelimit.redis_url' => "unix://$dir/$name.sock"], $code);
    echo "$name: ", trim($r['out']), "\n";
}
foreach ($servers as $s) {
    proc_terminate($s);
    proc_close($s);
}
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('redis_path_module_or_script');
?>
--EXPECT--
module server up: true
plain server up: true
module: fixed_window 3 of 5, sliding_window 3 of 5, 5 admitted of 8, redis_path module
plain: fixed_window 3 of 5, sliding_window 3 of 5, 5 admitted of 8, redis_path script
