--TEST--
php.ini: an empty ratelimit.db_path means php-ratelimit.sqlite in the per-user directory <temp dir>/php-ratelimit-<euid>/, with its key next to it
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_path_default/parent.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

// The child's temp dir is our test dir (TMPDIR), and it sets no db_path.
$code = 'var_dump(ini_get("ratelimit.db_path"), sys_get_temp_dir() === getenv("TMPDIR"));'
    . '$d = ratelimit_acquire("x", 2, 60); echo "allowed=", var_export($d->allowed, true), "\n";';
$r = rl_run([], $code, ['inherit' => false, 'env' => ['TMPDIR' => $dir]]);
echo $r['out'], $r['err'];
$r = rl_run([], $code, ['inherit' => false, 'env' => ['TMPDIR' => $dir]]);
echo $r['out'], $r['err'];
// In the temp dir, only the per-user directory; in it, besides SQLite's own -wal/-shm files,
// only the database and its key.
$user = rl_default_dir($dir);
$top = array_values(array_diff(scandir($dir), ['.', '..']));
echo "in the temp dir: ", implode(' ', $top), $top === [basename($user)] ? ', the per-user directory' : '', ", mode ", decoct(fileperms($user) & 07777), "\n";
$files = array_values(array_filter(scandir($user), fn($f) => !in_array($f, ['.', '..']) && !preg_match('/-(wal|shm|journal)$/', $f)));
echo implode("\n", $files), "\n";
echo "key: ", filesize("$user/php-ratelimit.sqlite.key"), " bytes, mode ", decoct(fileperms("$user/php-ratelimit.sqlite.key") & 0777), "\n";
// A third process sees the bucket the first two used (same file, same key).
$r = rl_run([], 'echo ratelimit_acquire("x", 2, 60)->reason, "\n";', ['inherit' => false, 'env' => ['TMPDIR' => $dir]]);
echo $r['out'], $r['err'];
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_path_default');
?>
--EXPECTF--
string(0) ""
bool(true)
allowed=true
string(0) ""
bool(true)
allowed=true
in the temp dir: php-ratelimit-%d, the per-user directory, mode 700
php-ratelimit.sqlite
php-ratelimit.sqlite.key
php-ratelimit.sqlite.queue
key: 32 bytes, mode 600
rate
