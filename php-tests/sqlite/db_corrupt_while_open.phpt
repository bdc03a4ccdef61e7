--TEST--
The database overwritten with junk while another process has it open: the next process to read it answers "unavailable" and moves it aside once; from 1 s after, every process shares the rebuilt file and one limit
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_corrupt_while_open/db.sqlite
error_log={TMP}/rl-phpt-db_corrupt_while_open/php-errors.log
--SKIPIF--
<?php if (!trim((string)shell_exec('command -v sqlite3'))) die('skip sqlite3 CLI needed');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$db = ini_get('ratelimit.db_path');
$w = rl_worker();
echo "worker before: ", rl_worker_cmd($w, 'a before 5 86400'), "\n";
// Every page into the file, then junk over it in place (same inode), as a failing disk would.
shell_exec(rl_sqlite3() . ' ' . escapeshellarg($db) . ' "PRAGMA wal_checkpoint(TRUNCATE)"');
$size = filesize($db);
$f = fopen($db, 'r+');
fwrite($f, str_repeat("\xA5junk", intdiv($size, 5) + 1));
fclose($f);

$d = ratelimit_acquire('client', 3, 86400);
echo "this process, first: ", $d->allowed ? 'allowed' : 'denied', " $d->reason\n";
echo "moved aside: ", count(preg_grep('/\.corrupt-\d+$/', glob("$db.corrupt-*"))), " file (with its -wal and -shm: ",
    count(glob("$db.corrupt-*")), ")\n";
rl_pause(1.1);
$admitted = 0;
for ($i = 0; $i < 3; $i++) {
    $admitted += rl_worker_cmd($w, 'a client 3 86400') === 'ok';
    $admitted += ratelimit_acquire('client', 3, 86400)->allowed;
}
echo "admitted by both processes: $admitted of 6 asked (limit 3)\n";
$s = json_decode(rl_worker_cmd($w, 's'), true);
echo "worker sees: storage_errors={$s['storage_errors']} unavailable={$s['unavailable']}\n";
rl_worker_stop($w);
echo "integrity_check: ", trim((string)shell_exec(rl_sqlite3() . ' ' . escapeshellarg($db) . ' "PRAGMA integrity_check"')), "\n";
$log = (string)file_get_contents(ini_get('error_log'));
echo "log: moved aside ", substr_count($log, 'moved aside'), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_corrupt_while_open');
?>
--EXPECT--
worker before: ok
this process, first: denied unavailable
moved aside: 1 file (with its -wal and -shm: 3)
admitted by both processes: 3 of 6 asked (limit 3)
worker sees: storage_errors=1 unavailable=1
integrity_check: ok
log: moved aside 1
