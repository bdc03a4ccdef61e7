--TEST--
The database truncated to 0 bytes while a worker has it open: a process opening it then is denied "unavailable", each call within busy_timeout_ms once its first open (at most 1 s) failed, never 1 s a call; the open worker keeps the limit exact, and once it ends the other decides with the state it left
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_truncated_while_open/db.sqlite
ratelimit.busy_timeout_ms=100
error_log={TMP}/rl-phpt-db_truncated_while_open/php-errors.log
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$db = ini_get('ratelimit.db_path');
$w = rl_worker();
echo "worker: ", rl_worker_cmd($w, 'a client 3 86400'), " ", rl_worker_cmd($w, 'a client 3 86400'), "\n";
// `: > db.sqlite` under the worker: same inode, no page left (its -wal and -shm stay).
$f = fopen($db, 'r+');
ftruncate($f, 0);
fclose($f);

$t = hrtime(true);
$d = ratelimit_acquire('client', 3, 86400);
$first = rl_since($t);
echo "this process, first call: ", var_export($d->allowed, true), " $d->reason\n";
rl_check('first call within its open budget (1 s + 0.5 s)', $first < 1.5, $first);
$slowest = 0.0;
for ($i = 0; $i < 3; $i++) {
    $t = hrtime(true);
    $d = ratelimit_acquire('client', 3, 86400);
    $slowest = max($slowest, rl_since($t));
    echo "  then: ", var_export($d->allowed, true), " $d->reason\n";
}
rl_check('each later call within busy_timeout_ms (0.1 s + 0.4 s)', $slowest < 0.5, $slowest);
echo "worker after: ", rl_worker_cmd($w, 'a client 3 86400'), " ", rl_worker_cmd($w, 'a client 3 86400'), "\n";
rl_worker_stop($w);
$d = ratelimit_acquire('client', 3, 86400);
echo "worker gone, this process: ", var_export($d->allowed, true), " $d->reason\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_truncated_while_open');
?>
--EXPECT--
worker: ok ok
this process, first call: false unavailable
first call within its open budget (1 s + 0.5 s): ok
  then: false unavailable
  then: false unavailable
  then: false unavailable
each later call within busy_timeout_ms (0.1 s + 0.4 s): ok
worker after: ok rate
worker gone, this process: false rate
