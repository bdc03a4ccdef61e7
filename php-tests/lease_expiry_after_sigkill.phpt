--TEST--
A lease of a process killed with SIGKILL is not freed at once, but expires ratelimit.lease_ttl seconds after it was taken
--EXTENSIONS--
ratelimit
--INI--
ratelimit.lease_ttl=1
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

[$proc, $pipes] = rl_spawn([], '$d = ratelimit_acquire("k", 10, 60, 1);'
    . 'echo $d->allowed ? "held\n" : "denied $d->reason\n"; fflush(STDOUT); sleep(30);');
register_shutdown_function(function () use ($proc, $pipes) { rl_kill($proc, $pipes); });
$tBefore = hrtime(true);  // the lease was taken after this ...
$line = rl_read_line($pipes[1], 10);
$t0 = hrtime(true);       // ... and before this
echo "child: ", var_export($line, true), "\n";

$pid = proc_get_status($proc)['pid'];
if (function_exists('posix_kill')) {
    posix_kill($pid, 9);
} else {
    proc_terminate($proc, 9);
}
// (PHP 8.2 reports the exit status only once: keep the status that shows it.)
for ($i = 0; $i < 200; $i++) {
    $st = proc_get_status($proc);
    if (!$st['running']) break;
    usleep(5000);
}
echo "killed: ", var_export(!$st['running'] && $st['signaled'] && $st['termsig'] === 9, true), "\n";

// Right after the kill: the slot is still held (no request shutdown ran).
$d = ratelimit_acquire('k', 10, 60, 1);
$el = rl_since($t0);
echo "at once: $d->reason, live_leases=", ratelimit_stats()['live_leases'], "\n";
rl_check('checked before the ttl', $el < 0.9, $el);
rl_check('retryAfter <= time left of the ttl', $d->retryAfter > 0 && $d->retryAfter <= 1.0 - $el + 0.01, [$d->retryAfter, $el]);

// Still held half-way through the ttl.
$wait = 0.5 - rl_since($tBefore);
if ($wait > 0) usleep((int)($wait * 1e6));
$d = ratelimit_acquire('k', 10, 60, 1);
$el = rl_since($tBefore);
echo "at 0.5 s: $d->reason\n";
rl_check('still before the ttl', $el < 0.95, $el);

// Free after the ttl (taken before $t0, so expired by $t0 + 1 s; a margin for ms rounding).
$wait = 1.15 - rl_since($t0);
if ($wait > 0) usleep((int)($wait * 1e6));
$d = ratelimit_acquire('k', 10, 60, 1);
echo "after ttl: $d->reason, lease ", $d->lease === null ? 'none' : 'new', "\n";
$s = ratelimit_stats();
echo "leases_expired={$s['leases_expired']} live_leases={$s['live_leases']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('lease_expiry_after_sigkill');
?>
--EXPECT--
child: 'held'
killed: true
at once: inflight, live_leases=1
checked before the ttl: ok
retryAfter <= time left of the ttl: ok
at 0.5 s: inflight
still before the ttl: ok
after ttl: ok, lease new
leases_expired=1 live_leases=1
