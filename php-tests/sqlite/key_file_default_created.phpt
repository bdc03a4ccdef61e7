--TEST--
Key file: by default <db_path>.key is created on first use with 32 random bytes and mode 0600, and then kept
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-key_file_default_created/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$key = ini_get('ratelimit.db_path') . '.key';

echo "before first use: ", file_exists($key) ? 'exists' : 'absent', "\n";
umask(0);   // the mode must not depend on the umask
ratelimit_acquire('k', 5, 60);
clearstatcache();
echo "after: ", file_exists($key) ? 'exists' : 'absent', ", ", filesize($key), " bytes, mode ", decoct(fileperms($key) & 0777), "\n";
$bytes = file_get_contents($key);
echo "not all equal bytes: ", var_export(count(array_unique(str_split($bytes))) > 4, true), "\n";
// Only the database (and SQLite's -wal/-shm) and the key: no temporary file left behind.
$left = array_filter(scandir($dir), fn($f) => !in_array($f, ['.', '..', 'db.sqlite', 'db.sqlite.key', 'db.sqlite.queue', 'db.sqlite-wal', 'db.sqlite-shm', 'db.sqlite-journal'], true));
echo "other files: ", implode(',', $left) ?: 'none', "\n";

// Another process uses the same key and does not rewrite it.
$mtime = filemtime($key);
$r = rl_run([], 'echo ratelimit_acquire("k", 5, 60)->remaining, "\n";');
echo "child: ", $r['out'], $r['err'];
clearstatcache();
echo "key unchanged: ", var_export(file_get_contents($key) === $bytes && filemtime($key) === $mtime, true), "\n";
// A second, fresh database gets a different random key.
$r = rl_run(['ratelimit.db_path' => "$dir/other.sqlite"], 'ratelimit_acquire("k", 5, 60);');
echo $r['out'], $r['err'];
echo "other key: ", filesize("$dir/other.sqlite.key"), " bytes, differs: ", var_export(file_get_contents("$dir/other.sqlite.key") !== $bytes, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('key_file_default_created');
?>
--EXPECT--
before first use: absent
after: exists, 32 bytes, mode 600
not all equal bytes: true
other files: none
child: 3
key unchanged: true
other key: 32 bytes, differs: true
