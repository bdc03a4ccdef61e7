--TEST--
ratelimit_release() by lease string frees a lease another process holds (once); that process's request end then frees nothing more
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

[$proc, $pipes] = rl_spawn([], '$d = ratelimit_acquire("cross", 10, 60, 1); echo $d->lease, "\n"; fflush(STDOUT);'
    . 'fgets(STDIN); echo "child sees live_leases=", ratelimit_stats()["live_leases"], "\n";');
$lease = rl_read_line($pipes[1], 10);
echo "lease from child: ", preg_match('/^1[0-9a-f]{96}$/', (string)$lease) ? 'ok' : var_export($lease, true), "\n";
var_dump(ratelimit_release($lease), ratelimit_release($lease));
$mine = ratelimit_acquire('cross', 10, 60, 1);
echo "slot taken here: $mine->reason\n";
fwrite($pipes[0], "go\n");
fclose($pipes[0]);
stream_set_blocking($pipes[1], true);
echo stream_get_contents($pipes[1]), stream_get_contents($pipes[2]);
fclose($pipes[1]);
fclose($pipes[2]);
proc_close($proc);
$s = ratelimit_stats();
echo "after the child ended: live_leases={$s['live_leases']}, next: ", ratelimit_acquire('cross', 10, 60, 1)->reason, "\n";
var_dump(ratelimit_release($mine));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('release_cross_process');
?>
--EXPECT--
lease from child: ok
bool(true)
bool(false)
slot taken here: ok
child sees live_leases=1
after the child ended: live_leases=1, next: inflight
bool(true)
