--TEST--
Storage: the database is created lazily (no file before the first call) and is in WAL mode
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-storage_wal_mode/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();   // created after module startup: nothing may have been opened yet
$db = ini_get('ratelimit.db_path');

echo "before the first call: ", file_exists($db) ? 'exists' : 'absent', "\n";
ratelimit_acquire('w', 5, 60);
clearstatcache();
$h = file_get_contents($db, false, null, 0, 100);
echo "SQLite file: ", var_export(str_starts_with($h, "SQLite format 3\0"), true), "\n";
// Header bytes 18 and 19 (file format write/read version) are 2 in WAL mode.
echo "WAL mode: ", var_export(ord($h[18]) === 2 && ord($h[19]) === 2, true), "\n";
echo "WAL file: ", var_export(is_file("$db-wal"), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('storage_wal_mode');
?>
--EXPECT--
before the first call: absent
SQLite file: true
WAL mode: true
WAL file: true
