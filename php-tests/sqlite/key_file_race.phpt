--TEST--
First use racing: processes that start together on a fresh database all end with the same key (one bucket, one file content), and none is refused
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-key_file_race/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

const N = 12;
// Each child loads the extension, says "ready", waits for "go" on stdin, then makes its first call.
$code = 'echo "ready\n"; fflush(STDOUT); fgets(STDIN);'
    . '$d = ratelimit_acquire("racer", 100, 3600);'
    . 'echo $d->allowed ? "allowed" : "denied ($d->reason)", " ", md5_file(ini_get("ratelimit.db_path") . ".key"), "\n";';
$bad = 0;
for ($round = 1; $round <= 12; $round++) {
    $db = "$dir/round$round.sqlite";
    $children = [];
    for ($i = 0; $i < N; $i++) {
        $children[] = rl_spawn(['ratelimit.db_path' => $db], $code);
    }
    foreach ($children as [$proc, $pipes]) {
        rl_read_line($pipes[1], 10);
    }
    foreach ($children as [$proc, $pipes]) {
        fwrite($pipes[0], "go\n");
    }
    $lines = [];
    foreach ($children as [$proc, $pipes]) {
        fclose($pipes[0]);
        stream_set_blocking($pipes[1], true);
        $lines[] = trim(stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]));
        fclose($pipes[1]);
        fclose($pipes[2]);
        proc_close($proc);
    }
    $md5 = md5_file("$db.key");
    $counts = array_count_values($lines);
    // The same key in every process means the same pseudonym: one bucket that gave N tokens.
    $r = rl_run(['ratelimit.db_path' => $db], '$s = ratelimit_stats(); echo ratelimit_peek("racer", 100, 3600)->remaining, " ", $s["entries"], " ", $s["allowed"];');
    $summary = filesize("$db.key") . " byte key, outcomes " . json_encode($counts) . ", remaining/entries/allowed " . trim($r['out'] . $r['err']);
    if ($counts !== ["allowed $md5" => N] || trim($r['out']) !== (100 - N) . " 1 " . N) {
        echo "round $round: $summary\n";
        $bad++;
    }
}
echo "rounds where not every process was allowed with the one key: $bad\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('key_file_race');
?>
--EXPECT--
rounds where not every process was allowed with the one key: 0
