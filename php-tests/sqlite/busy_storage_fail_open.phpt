--TEST--
Storage busy with ratelimit.fail_open=1: allowed, reason "unavailable", source "fail_open", no lease, counted, logged once
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-busy_storage_fail_open/db.sqlite
ratelimit.busy_timeout_ms=100
ratelimit.fail_open=1
error_log={TMP}/rl-phpt-busy_storage_fail_open/php-errors.log
--SKIPIF--
<?php if (!trim((string)shell_exec('command -v sqlite3'))) die('skip sqlite3 CLI needed');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
require __DIR__ . '/_busy.inc';
rl_test_dir();

ratelimit_acquire('warm-up', 10, 60);
$held = rl_hold_write_lock(ini_get('ratelimit.db_path'));
register_shutdown_function(function () use (&$held) { if ($held) rl_release_write_lock($held); });

$t = hrtime(true);
$d = ratelimit_acquire('busy', 10, 60, 1);
$el = rl_since($t);
ratelimit_acquire('busy', 10, 60, 1);   // a second admission within 10 s: no second log line
echo "allowed=", var_export($d->allowed, true), " reason=$d->reason lease=", var_export($d->lease, true), " limit=$d->limit\n";
echo "source=$d->source\n";
rl_check('within busy_timeout_ms + 0.5 s', $el >= 0.05 && $el < 0.6, $el);
var_dump(ratelimit_release($d));

rl_release_write_lock($held);
$held = null;
// Nothing was taken while busy: the bucket is full, and the count arrives with the next write.
echo "remaining after: ", ratelimit_acquire('busy', 10, 60, 1)->remaining, "\n";
$s = ratelimit_stats();
echo "unavailable={$s['unavailable']} live_leases={$s['live_leases']}\n";
$log = (string)@file_get_contents(ini_get('error_log'));
echo "log: ", substr_count($log, 'ratelimit.fail_open admitting'), " fail_open line(s), names the subject: ",
    var_export(str_contains($log, 'busy'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('busy_storage_fail_open');
?>
--EXPECT--
allowed=true reason=unavailable lease=NULL limit=10
source=fail_open
within busy_timeout_ms + 0.5 s: ok
bool(false)
remaining after: 9
unavailable=2 live_leases=1
log: 1 fail_open line(s), names the subject: false
