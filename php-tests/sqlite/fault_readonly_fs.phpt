--TEST--
A read-only file system (a tmpfs remounted ro while no process has the file open): "unavailable" without an exception, counted, logged once; decisions resume by themselves when it is writable again
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-fault_readonly_fs/fs/db.sqlite
error_log={TMP}/rl-phpt-fault_readonly_fs/php-errors.log
--SKIPIF--
<?php if (posix_geteuid() !== 0) die('skip mounting a tmpfs needs root');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$fs = rl_test_dir();
exec('mount -t tmpfs -o size=4m,mode=0700 tmpfs ' . escapeshellarg($fs), $o, $rc);
echo "mounted: ", var_export($rc === 0, true), "\n";
register_shutdown_function(fn() => exec('umount ' . escapeshellarg($fs) . ' 2>/dev/null'));

// Another process makes the file and spends 2 of 5 tokens, then ends.
$r = rl_run([], 'ratelimit_acquire("RO-Subject", 5, 86400); echo ratelimit_acquire("RO-Subject", 5, 86400)->remaining, "\n";');
echo "before: remaining ", trim($r['out']), "\n";
exec('mount -o remount,ro ' . escapeshellarg($fs), $o, $rc);
echo "remounted ro: ", var_export($rc === 0, true), "\n";

$out = [];
for ($i = 0; $i < 3; $i++) {
    try {
        $d = ratelimit_acquire('RO-Subject', 5, 86400);
        $out[] = ($d->allowed ? 'allowed ' : 'denied ') . $d->reason;
    } catch (Throwable $e) {
        $out[] = get_class($e) . ': ' . $e->getMessage();
    }
}
echo "read-only: ", implode(', ', array_unique($out)), "\n";
exec('mount -o remount,rw ' . escapeshellarg($fs), $o, $rc);
$d = ratelimit_acquire('RO-Subject', 5, 86400);
echo "writable again: $d->reason, remaining $d->remaining (nothing was taken while read-only)\n";
$s = ratelimit_stats();
echo "counted: unavailable={$s['unavailable']} storage_errors={$s['storage_errors']}\n";
$log = (string)file_get_contents(ini_get('error_log'));
echo "log: unavailable ", substr_count($log, 'storage unavailable'), ", available again ", substr_count($log, 'available again'),
    ", names the subject: ", var_export(str_contains($log, 'RO-Subject'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
exec('umount ' . escapeshellarg(sys_get_temp_dir() . '/rl-phpt-fault_readonly_fs/fs') . ' 2>/dev/null');
rl_clean('fault_readonly_fs');
?>
--EXPECT--
mounted: true
before: remaining 3
remounted ro: true
read-only: denied unavailable
writable again: ok, remaining 2 (nothing was taken while read-only)
counted: unavailable=3 storage_errors=3
log: unavailable 1, available again 1, names the subject: false
