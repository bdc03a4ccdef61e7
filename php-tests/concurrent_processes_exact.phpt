--TEST--
Several processes at once share one bucket: exactly $limit calls admitted in total, and in-flight slots hold across processes
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();
ratelimit_stats();   // creates the database

$code = '$at = (float)getenv("RL_START_AT"); while (microtime(true) < $at) usleep(200);'
    . '$n = 0; $held = 0; $leases = [];'
    . 'for ($i = 0; $i < 15; $i++) { $n += ratelimit_acquire("shared", 20, 3600)->allowed ? 1 : 0;'
    . ' $d = ratelimit_acquire("slots", 1000, 3600, 3); if ($d->allowed) { $held++; $leases[] = $d; } }'
    . 'echo "$n $held\n"; fwrite(STDOUT, ""); usleep(300000);';
$at = microtime(true) + 0.4;
$children = [];
for ($i = 0; $i < 4; $i++) {
    $children[] = rl_spawn([], $code, ['env' => ['RL_START_AT' => sprintf('%.6f', $at)]]);
}
$admitted = 0;
$slots = 0;
foreach ($children as [$proc, $pipes]) {
    fclose($pipes[0]);
    [$n, $held] = array_map('intval', explode(' ', trim(stream_get_contents($pipes[1]))) + [0, 0]);
    $admitted += $n;
    $slots += $held;
    $err = stream_get_contents($pipes[2]);
    if ($err !== '') echo "stderr: $err\n";
    fclose($pipes[1]);
    fclose($pipes[2]);
    proc_close($proc);
}
echo "admitted $admitted of 60 calls (limit 20)\n";
echo "leases held at once: $slots (inflight 3)\n";
$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']} denied_inflight={$s['denied_inflight']} live_leases={$s['live_leases']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('concurrent_processes_exact');
?>
--EXPECT--
admitted 20 of 60 calls (limit 20)
leases held at once: 3 (inflight 3)
allowed=23 denied_rate=40 denied_inflight=57 live_leases=0
