--TEST--
The database removed (with its -wal and -shm) under running processes: from 1 s after, every process decides on the new file, admissions across them never exceed one limit, and "reopened" is counted
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_removed_reopened/db.sqlite
error_log={TMP}/rl-phpt-db_removed_reopened/php-errors.log
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$db = ini_get('ratelimit.db_path');
ratelimit_acquire('warm-up', 5, 86400);
$workers = [rl_worker(), rl_worker()];
foreach ($workers as $i => $w) echo "worker $i before: ", rl_worker_cmd($w, 'a before 5 86400'), "\n";

foreach (['', '-wal', '-shm'] as $suffix) @unlink($db . $suffix);
echo "removed: ", var_export(!file_exists($db), true), "\n";
rl_pause(1.1);

// One client, limit 3 per day, asked 3 times by each of the three processes.
$admitted = 0;
for ($round = 0; $round < 3; $round++) {
    foreach ($workers as $w) $admitted += rl_worker_cmd($w, 'a client 3 86400') === 'ok';
    $admitted += ratelimit_acquire('client', 3, 86400)->allowed;
}
echo "admitted across 3 processes: $admitted of 9 asked (limit 3)\n";
echo "file there again: ", var_export(is_file($db), true), "\n";
$s = ratelimit_stats();
echo "reopened: {$s['reopened']} (3 processes had it open), entries: {$s['entries']}\n";
$err = '';
foreach ($workers as $w) $err .= rl_worker_stop($w);
echo "integrity_check: ", trim((string)shell_exec(rl_sqlite3() . ' ' . escapeshellarg($db) . ' "PRAGMA integrity_check"')), "\n";
$log = (string)@file_get_contents(ini_get('error_log'));
echo "log lines: this process ", substr_count($log, 'opened the path anew'), ", the workers (stderr) ", substr_count($err, 'opened the path anew'), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_removed_reopened');
?>
--EXPECT--
worker 0 before: ok
worker 1 before: ok
removed: true
admitted across 3 processes: 3 of 9 asked (limit 3)
file there again: true
reopened: 3 (3 processes had it open), entries: 1
integrity_check: ok
log lines: this process 1, the workers (stderr) 2
