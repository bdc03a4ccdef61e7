--TEST--
$request_id: while the first admission's lease lives, a retry with the same id and terms is denied "in_progress" (retryAfter until that lease ends, Retry-After, no lease, nothing taken, releasing it frees nothing), from any process; with inflight 1 never two in flight whatever mix of that id and fresh ones; once the lease ended (released, or the first request died) the retry is a replay; counted as denied_in_progress
--EXTENSIONS--
ratelimit
--INI--
ratelimit.lease_ttl=60
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$a = ratelimit_acquire('p', 5, 3600, 1, 'orders', 1, 'order-1');
echo "first: reason=$a->reason lease=", $a->lease === null ? 'null' : 'yes', " remaining=$a->remaining\n";
$b = ratelimit_acquire('p', 5, 3600, 1, 'orders', 1, 'order-1');
echo "retry: allowed=", var_export($b->allowed, true), " reason=$b->reason replay=", var_export($b->replay, true),
    " lease=", var_export($b->lease, true), " remaining=$b->remaining\n";
rl_check('retryAfter is until the first lease ends', $b->retryAfter > 58.0 && $b->retryAfter <= 60.0, $b->retryAfter);
echo "Retry-After: ", $b->headers()['Retry-After'], "\n";
echo "releasing it frees nothing: ", var_export(ratelimit_release($b), true), ", live_leases=", ratelimit_stats()['live_leases'], "\n";
$r = rl_run([], '$d = ratelimit_acquire("p", 5, 3600, 1, "orders", 1, "order-1"); echo $d->reason, " ", var_export($d->lease, true), "\n";');
echo "from another process: ", trim($r['out']), "\n";
echo "-- never two in flight: that id and fresh ids, 20 calls\n";
$leases = 0;
$reasons = [];
for ($i = 0; $i < 20; $i++) {
    $id = $i % 2 ? 'order-1' : "fresh-$i";
    $d = ratelimit_acquire('p', 5, 3600, 1, 'orders', 1, $id);
    $leases += $d->lease !== null;
    $reasons[$d->reason] = ($reasons[$d->reason] ?? 0) + 1;
}
ksort($reasons);
echo "leases taken: $leases, reasons: ", json_encode($reasons), "\n";
echo "tokens taken: ", 5 - ratelimit_peek('p', 5, 3600, 'orders')->remaining, "\n";
echo "-- the first request releases its lease: the retry is a replay\n";
var_dump(ratelimit_release($a));
$c = ratelimit_acquire('p', 5, 3600, 1, 'orders', 1, 'order-1');
echo "retry: allowed=", var_export($c->allowed, true), " replay=", var_export($c->replay, true), " lease=", var_export($c->lease, true), "\n";

echo "-- the first request dies of a fatal error: its lease ends with the request\n";
$r = rl_run([], '$d = ratelimit_acquire("q", 5, 3600, 1, "orders", 1, "job-9"); echo $d->reason, "\n"; fflush(STDOUT); undefined_function_xyz();');
echo "died: ", trim(strtok($r['out'], "\n")), " fatal=", var_export(str_contains($r['out'] . $r['err'], 'Fatal error'), true), "\n";
$d = ratelimit_acquire('q', 5, 3600, 1, 'orders', 1, 'job-9');
echo "retry: allowed=", var_export($d->allowed, true), " replay=", var_export($d->replay, true), " remaining=$d->remaining live_leases=", ratelimit_stats()['live_leases'], "\n";
$s = ratelimit_stats();
echo "denied_in_progress={$s['denied_in_progress']} denied_inflight={$s['denied_inflight']} retries={$s['retries']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_in_progress');
?>
--EXPECT--
first: reason=ok lease=yes remaining=4
retry: allowed=false reason=in_progress replay=false lease=NULL remaining=4
retryAfter is until the first lease ends: ok
Retry-After: 60
releasing it frees nothing: false, live_leases=1
from another process: in_progress NULL
-- never two in flight: that id and fresh ids, 20 calls
leases taken: 0, reasons: {"in_progress":10,"inflight":10}
tokens taken: 1
-- the first request releases its lease: the retry is a replay
bool(true)
retry: allowed=true replay=true lease=NULL
-- the first request dies of a fatal error: its lease ends with the request
died: ok fatal=true
retry: allowed=true replay=true remaining=4 live_leases=0
denied_in_progress=12 denied_inflight=10 retries=2
