--TEST--
Key file: shorter than 32 bytes (set explicitly, or the default <db_path>.key) is a RateLimit\Exception naming the path; 32 bytes work
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-key_file_short_error/db.sqlite
ratelimit.key_file={TMP}/rl-phpt-key_file_short_error/short.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$short = ini_get('ratelimit.key_file');
file_put_contents($short, str_repeat("\x42", 31));
chmod($short, 0600);   // a key is for its owner alone: the length is what this test is about

try {
    ratelimit_acquire('s', 5, 60);
    echo "31 bytes: no exception\n";
} catch (RateLimit\Exception $e) {
    echo "31 bytes: RateLimit\\Exception naming the path: ", var_export(str_contains($e->getMessage(), $short), true), "\n";
}
echo "unchanged: ", var_export(file_get_contents($short) === str_repeat("\x42", 31), true), "\n";

$probe = 'try { $d = ratelimit_acquire("s", 5, 60); echo "allowed=", var_export($d->allowed, true), "\n"; }'
    . ' catch (Throwable $e) { echo get_class($e), " names path: ", var_export(str_contains($e->getMessage(), getenv("RL_PATH")), true), "\n"; }';
// An empty explicit key file.
file_put_contents("$dir/empty.key", '');
chmod("$dir/empty.key", 0600);
$r = rl_run(['ratelimit.key_file' => "$dir/empty.key"], $probe, ['env' => ['RL_PATH' => "$dir/empty.key"]]);
echo "0 bytes: ", $r['out'], $r['err'];
// The default key next to another database, already there with 31 bytes.
file_put_contents("$dir/other.sqlite.key", str_repeat("\x42", 31));
chmod("$dir/other.sqlite.key", 0600);
$r = rl_run(['ratelimit.db_path' => "$dir/other.sqlite", 'ratelimit.key_file' => ''], $probe, ['inherit' => false, 'env' => ['RL_PATH' => "$dir/other.sqlite.key"]]);
echo "default key of 31 bytes: ", $r['out'], $r['err'];
echo "default key unchanged: ", var_export(file_get_contents("$dir/other.sqlite.key") === str_repeat("\x42", 31), true), "\n";
// 32 bytes work (random ones: 32 equal bytes are refused as weak, see trust_key_weak.phpt).
file_put_contents("$dir/good.key", random_bytes(32));
chmod("$dir/good.key", 0600);
$r = rl_run(['ratelimit.key_file' => "$dir/good.key"], $probe, ['env' => ['RL_PATH' => "$dir/good.key"]]);
echo "32 bytes: ", $r['out'], $r['err'];
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('key_file_short_error');
?>
--EXPECT--
31 bytes: RateLimit\Exception naming the path: true
unchanged: true
0 bytes: RateLimit\Exception names path: true
default key of 31 bytes: RateLimit\Exception names path: true
default key unchanged: true
32 bytes: allowed=true
