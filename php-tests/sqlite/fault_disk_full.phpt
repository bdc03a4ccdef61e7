--TEST--
Disk full (a small tmpfs the test mounts): decisions answer "unavailable" without an exception, counted as storage_errors, logged once; they resume by themselves when space is freed
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-fault_disk_full/fs/db.sqlite
ratelimit.fail_open=0
error_log={TMP}/rl-phpt-fault_disk_full/php-errors.log
--SKIPIF--
<?php if (posix_geteuid() !== 0) die('skip mounting a tmpfs needs root');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$fs = rl_test_dir();
exec('mount -t tmpfs -o size=320k,mode=0700 tmpfs ' . escapeshellarg($fs), $o, $rc);
echo "mounted: ", var_export($rc === 0, true), "\n";
register_shutdown_function(fn() => exec('umount ' . escapeshellarg($fs) . ' 2>/dev/null'));

for ($i = 0; $i < 20; $i++) ratelimit_acquire("before-$i", 5, 60);
$f = fopen("$fs/filler", 'w');
while (@fwrite($f, str_repeat('x', 4096)) === 4096) {}
fclose($f);
// Space SQLite had already allocated (a WAL longer than its last transaction) takes a few more
// writes, depending on the file's layout: used up first, until the first "unavailable".
for ($slack = 0; $slack < 50 && ratelimit_acquire("slack-$slack", 5, 60)->reason === 'ok'; $slack++) {}
echo "slack used up: ", var_export($slack < 50, true), "\n";

$reasons = [];
$exceptions = 0;
for ($i = 0; $i < 200; $i++) {
    try {
        $d = ratelimit_acquire("Full-Subject-$i", 5, 60);
        $reasons[$d->reason . ($d->allowed ? '+' : '-')] = ($reasons[$d->reason . ($d->allowed ? '+' : '-')] ?? 0) + 1;
    } catch (Throwable $e) {
        $exceptions++;
    }
}
ksort($reasons);
echo "while full: ", json_encode($reasons), ", exceptions: $exceptions\n";
$s = ratelimit_stats();
echo "counted: unavailable={$s['unavailable']} storage_errors={$s['storage_errors']}\n";

unlink("$fs/filler");
$d = ratelimit_acquire('after', 5, 60);
echo "space freed: $d->reason, remaining $d->remaining\n";
$s = ratelimit_stats();
echo "written once the fault ended: unavailable={$s['unavailable']} storage_errors={$s['storage_errors']}\n";
echo "integrity_check: ", trim((string)shell_exec(rl_sqlite3() . ' ' . escapeshellarg(ini_get('ratelimit.db_path')) . ' "PRAGMA integrity_check"')), "\n";
$log = (string)file_get_contents(ini_get('error_log'));
echo "log: unavailable ", substr_count($log, 'storage unavailable'), ", available again ", substr_count($log, 'available again'),
    ", names a subject: ", var_export(str_contains($log, 'Full-Subject'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
exec('umount ' . escapeshellarg(sys_get_temp_dir() . '/rl-phpt-fault_disk_full/fs') . ' 2>/dev/null');
rl_clean('fault_disk_full');
?>
--EXPECT--
mounted: true
slack used up: true
while full: {"unavailable-":200}, exceptions: 0
counted: unavailable=201 storage_errors=201
space freed: ok, remaining 4
written once the fault ended: unavailable=201 storage_errors=201
integrity_check: ok
log: unavailable 1, available again 1, names a subject: false
