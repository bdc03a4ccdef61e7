--TEST--
ratelimit_acquire_all() under 8 parallel processes: the tightest limit holds exactly, and no denied call charged the other limit
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();
ratelimit_stats();   // creates the store

$code = '$at = (float)getenv("RL_START_AT"); while (microtime(true) < $at) usleep(200);'
    . '$l = [["limit" => 1000, "per" => 3600, "scope" => "wide"], ["limit" => 30, "per" => 3600, "scope" => "tight"]];'
    . '$n = 0; for ($i = 0; $i < 10; $i++) { $n += ratelimit_acquire_all("shared", $l)->allowed ? 1 : 0; }'
    . 'echo "$n\n";';
$at = microtime(true) + 0.5;
$children = [];
for ($i = 0; $i < 8; $i++) {
    $children[] = rl_spawn([], $code, ['env' => ['RL_START_AT' => sprintf('%.6f', $at)]]);
}
$admitted = 0;
foreach ($children as [$proc, $pipes]) {
    fclose($pipes[0]);
    $admitted += (int)trim(stream_get_contents($pipes[1]));
    $err = stream_get_contents($pipes[2]);
    if ($err !== '') echo "stderr: $err\n";
    fclose($pipes[1]);
    fclose($pipes[2]);
    proc_close($proc);
}
echo "admitted $admitted of 80 calls (tightest limit 30)\n";
echo "wide charged only by the admissions: remaining ", ratelimit_peek('shared', 1000, 3600, 'wide')->remaining, "\n";
echo "tight: remaining ", ratelimit_peek('shared', 30, 3600, 'tight')->remaining, "\n";
rl_pause(1.1);
$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('compound_concurrent_processes_exact');
?>
--EXPECT--
admitted 30 of 80 calls (tightest limit 30)
wide charged only by the admissions: remaining 970
tight: remaining 0
allowed=30 denied_rate=50
