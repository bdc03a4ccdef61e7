--TEST--
Another host (or container) with another key at the same key-file path, on one store: refused with a RateLimit\Exception naming both key files and hosts, never recorded in turn; one subject's admissions across both stay within the one limit
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/_helpers.inc'; if ($why = rl_other_host_unavailable()) die("skip $why"); ?>
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_other_host_same_path_refused/k.key
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
$key = ini_get('ratelimit.key_file');
foreach (['k.key', 'theirs.key'] as $k) {
    file_put_contents("$dir/$k", random_bytes(32));
    chmod("$dir/$k", 0600);
}
$code = 'while (($l = fgets(STDIN)) !== false) { try { echo ratelimit_acquire("Shared-Subject", 10, 3600)->reason, "\n"; }'
    . ' catch (RateLimit\Exception $e) { echo "refused: ", $e->getMessage(), "\n"; } fflush(STDOUT); }';
$host = gethostname();
$here = rl_spawn([], $code);
$there = rl_spawn([], $code, ['prefix' => rl_other_host('container-2', "$dir/theirs.key", $key)]);
$ask = function (array $w): string { fwrite($w[1][0], "a\n"); fflush($w[1][0]); return rl_read_line($w[1][1], 10) ?: 'NO ANSWER'; };
$admitted = 0;
$refused = [];
for ($i = 0; $i < 12; $i++) {
    foreach ([$here, $there] as $w) {
        $a = $ask($w);
        $admitted += $a === 'ok';
        if (str_starts_with($a, 'refused: ')) $refused[] = $a;
    }
    if ($i === 5) rl_pause(1.1);    // both look at the recorded key again (at most once a second)
}
echo "admitted $admitted of 24 asked (limit 10)\n";
echo "the other host refused: ", count($refused), " times\n";
$m = $refused[0] ?? '';
echo "names the key file: ", var_export(substr_count($m, $key) === 2, true), "\n";
echo "names both hosts: ", var_export(str_contains($m, '"container-2 (boot ') && str_contains($m, '"' . $host . ' (boot '), true), "\n";
echo "names the subject: ", var_export(str_contains($m, 'Shared-Subject'), true), "\n";
foreach ([$here, $there] as $w) { fclose($w[1][0]); proc_close($w[0]); }
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('key_other_host_same_path_refused');
?>
--EXPECT--
admitted 10 of 24 asked (limit 10)
the other host refused: 12 times
names the key file: true
names both hosts: true
names the subject: false
