--TEST--
php.ini: an empty ratelimit.db_path means php-ratelimit.sqlite in the system temp dir, with its key next to it
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
// Besides SQLite's own -wal/-shm files, only the database and its key.
$files = array_values(array_filter(scandir($dir), fn($f) => !in_array($f, ['.', '..']) && !preg_match('/-(wal|shm|journal)$/', $f)));
echo implode("\n", $files), "\n";
echo "key: ", filesize("$dir/php-ratelimit.sqlite.key"), " bytes, mode ", decoct(fileperms("$dir/php-ratelimit.sqlite.key") & 0777), "\n";
// A third process sees the bucket the first two used (same file, same key).
$r = rl_run([], 'echo ratelimit_acquire("x", 2, 60)->reason, "\n";', ['inherit' => false, 'env' => ['TMPDIR' => $dir]]);
echo $r['out'], $r['err'];
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_path_default');
?>
--EXPECT--
string(0) ""
bool(true)
allowed=true
string(0) ""
bool(true)
allowed=true
php-ratelimit.sqlite
php-ratelimit.sqlite.key
key: 32 bytes, mode 600
rate
