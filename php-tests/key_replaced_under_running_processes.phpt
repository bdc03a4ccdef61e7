--TEST--
The key file replaced while processes run (atomic rename, then an in-place rewrite): from 1 s after, every process decides with the new key, so one client's admissions across all of them never exceed one limit
--EXTENSIONS--
ratelimit
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_replaced_under_running_processes/k.key
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
$key = ini_get('ratelimit.key_file');
$write = function (string $bytes) use ($key, $dir) {
    $tmp = "$dir/k.tmp";
    file_put_contents($tmp, $bytes);
    chmod($tmp, 0600);
    rename($tmp, $key);
};
$write(random_bytes(32));
ratelimit_acquire('warm-up', 5, 86400);
$workers = [rl_worker(), rl_worker()];
foreach ($workers as $i => $w) echo "worker $i with the first key: ", rl_worker_cmd($w, 'a warm-up 5 86400'), "\n";

$round = function (string $client) use ($workers): int {
    $admitted = 0;
    for ($i = 0; $i < 3; $i++) {
        foreach ($workers as $w) $admitted += rl_worker_cmd($w, "a $client 3 86400") === 'ok';
        $admitted += ratelimit_acquire($client, 3, 86400)->allowed;
    }
    // A process started now (a respawned worker, a CLI job) reads the new key too.
    $r = rl_run([], 'echo ratelimit_acquire("' . $client . '", 3, 86400)->reason;');
    return $admitted + ($r['out'] === 'ok');
};

$write(random_bytes(32));            // a rotation tool's atomic rename
rl_pause(1.1);
echo "after a rename: admitted ", $round('client-a'), " of 10 asked by 4 processes (limit 3)\n";

file_put_contents($key, random_bytes(32));   // a configuration tool rewriting it in place
rl_pause(1.1);
echo "after an in-place rewrite: admitted ", $round('client-b'), " of 10 asked (limit 3)\n";
$s = ratelimit_stats();
$err = '';
foreach ($workers as $w) $err .= rl_worker_stop($w);
echo "stats: allowed={$s['allowed']}\n";
// One line per kind per process per 10 s: the second change is counted for a later line.
echo "the workers logged 'key changed': ", substr_count($err, 'key changed'), " times\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('key_replaced_under_running_processes');
?>
--EXPECT--
worker 0 with the first key: ok
worker 1 with the first key: ok
after a rename: admitted 3 of 10 asked by 4 processes (limit 3)
after an in-place rewrite: admitted 3 of 10 asked (limit 3)
stats: allowed=9
the workers logged 'key changed': 2 times
