--TEST--
A corrupt database file (overwritten while no process had it open): "unavailable" without an exception, counted and logged once; the file is moved aside, rebuilt, and decisions resume
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_corrupt/db.sqlite
error_log={TMP}/rl-phpt-db_corrupt/php-errors.log
--SKIPIF--
<?php if (!trim((string)shell_exec('command -v sqlite3'))) die('skip sqlite3 CLI needed');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$db = ini_get('ratelimit.db_path');
$junk = str_repeat("this is not an SQLite database\n", 200);
file_put_contents($db, $junk);

$d = ratelimit_acquire('Corrupt-Subject-42', 5, 60);
echo "first: allowed=", var_export($d->allowed, true), " reason=$d->reason\n";
$aside = glob("$db.corrupt-*");
echo "moved aside: ", count($aside), " file(s), junk kept: ", var_export($aside && file_get_contents($aside[0]) === $junk, true), "\n";

$d = ratelimit_acquire('Corrupt-Subject-42', 5, 60);
echo "next: allowed=", var_export($d->allowed, true), " reason=$d->reason remaining=$d->remaining\n";
echo "peek: remaining=", ratelimit_peek('Corrupt-Subject-42', 5, 60)->remaining, "\n";
$s = ratelimit_stats();
echo "unavailable={$s['unavailable']} storage_errors={$s['storage_errors']} allowed={$s['allowed']}\n";
echo "integrity_check: ", trim((string)shell_exec(rl_sqlite3() . ' ' . escapeshellarg($db) . ' "PRAGMA integrity_check"')), "\n";

$log = (string)file_get_contents(ini_get('error_log'));
echo "log: moved aside ", substr_count($log, 'moved aside'), ", unavailable ", substr_count($log, 'storage unavailable'),
    ", available again ", substr_count($log, 'available again'), ", names the path: ", var_export(str_contains($log, $db), true),
    ", names the subject: ", var_export(str_contains($log, 'Corrupt-Subject'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_corrupt');
?>
--EXPECT--
first: allowed=false reason=unavailable
moved aside: 1 file(s), junk kept: true
next: allowed=true reason=ok remaining=4
peek: remaining=4
unavailable=1 storage_errors=1 allowed=1
integrity_check: ok
log: moved aside 1, unavailable 1, available again 1, names the path: true, names the subject: false
