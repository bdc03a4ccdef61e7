--TEST--
Two configurations with different key files on one store: the second gets a RateLimit\Exception naming both key files, instead of a silent split of every limit in two
--EXTENSIONS--
ratelimit
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_two_key_files_conflict/pool-a.key
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
foreach (['pool-a', 'pool-b'] as $k) {
    file_put_contents("$dir/$k.key", random_bytes(32));
    chmod("$dir/$k.key", 0600);
}
echo "pool a: ", ratelimit_acquire('Conflict-Subject', 3, 60)->reason, "\n";
$r = rl_run(['ratelimit.key_file' => "$dir/pool-b.key"],
    'try { ratelimit_acquire("Conflict-Subject", 3, 60); echo "no exception\n"; }'
    . ' catch (RateLimit\Exception $e) { echo get_class($e), "\n", $e->getMessage(), "\n"; }');
[$class, $message] = explode("\n", trim($r['out'] . $r['err'])) + ['', ''];
echo "pool b: $class\n";
echo "names pool b's key file: ", var_export(str_contains($message, "$dir/pool-b.key"), true), "\n";
echo "names pool a's key file: ", var_export(str_contains($message, "$dir/pool-a.key"), true), "\n";
echo "names the subject: ", var_export(str_contains($message, 'Conflict-Subject'), true), "\n";
echo "pool a still decides: ", ratelimit_acquire('Conflict-Subject', 3, 60)->reason, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('key_two_key_files_conflict');
?>
--EXPECT--
pool a: ok
pool b: RateLimit\Exception
names pool b's key file: true
names pool a's key file: true
names the subject: false
pool a still decides: ok
