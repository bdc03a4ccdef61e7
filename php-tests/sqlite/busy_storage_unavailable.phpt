--TEST--
Storage busy (another process holds the write lock): "unavailable", not allowed, within busy_timeout_ms, counted once the file is free
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-busy_storage_unavailable/db.sqlite
ratelimit.busy_timeout_ms=200
--SKIPIF--
<?php if (!trim((string)shell_exec('command -v sqlite3'))) die('skip sqlite3 CLI needed');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
require __DIR__ . '/_busy.inc';
rl_test_dir();

ratelimit_acquire('warm-up', 10, 60);   // creates the database
$held = rl_hold_write_lock(ini_get('ratelimit.db_path'));
register_shutdown_function(function () use (&$held) { if ($held) rl_release_write_lock($held); });

$t = hrtime(true);
$d = ratelimit_acquire('busy', 10, 60, 1, 'api');
$el = rl_since($t);
var_dump($d->allowed, $d->reason, $d->limit, $d->remaining, $d->retryAfter, $d->resetAfter, $d->lease, $d->scope);
rl_check('waited about busy_timeout_ms (0.1 s <= t < 0.2 s + 0.5 s)', $el >= 0.1 && $el < 0.7, $el);
$h = $d->headers();
echo "Retry-After: ", $h['Retry-After'] ?? 'missing', "\n";

$t = hrtime(true);
$d = ratelimit_acquire('busy', 5, 60);
$el = rl_since($t);
echo "again: ", var_export($d->allowed, true), " $d->reason limit=$d->limit\n";
rl_check('again within the timeout', $el < 0.7, $el);

rl_release_write_lock($held);
$held = null;

$d = ratelimit_acquire('busy', 10, 60, 1, 'api');
echo "lock gone: ", var_export($d->allowed, true), " $d->reason remaining=$d->remaining\n";
$s = ratelimit_stats();
echo "unavailable={$s['unavailable']} allowed={$s['allowed']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('busy_storage_unavailable');
?>
--EXPECT--
bool(false)
string(11) "unavailable"
int(10)
int(0)
float(1)
float(0)
NULL
string(3) "api"
waited about busy_timeout_ms (0.1 s <= t < 0.2 s + 0.5 s): ok
Retry-After: 1
again: false unavailable limit=5
again within the timeout: ok
lock gone: true ok remaining=9
unavailable=2 allowed=2
