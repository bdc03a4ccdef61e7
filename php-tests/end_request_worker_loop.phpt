--TEST--
ratelimit_end_request() ends a logical request's leases inside one PHP request (a RoadRunner or Swoole worker's loop): each of 100 requests takes the subject's only slot and forgets it, and every one is admitted
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "before any call (nothing open): ", ratelimit_end_request(), "\n";

// The worker's loop: inflight 1, so a lease left live by the previous request would deny.
$reasons = $ended = $live = [];
for ($i = 0; $i < 100; $i++) {
    $d = ratelimit_acquire('worker', 1000, 60, 1);
    $reasons[] = $d->reason;
    $ended[] = ratelimit_end_request();
    $live[] = ratelimit_stats()['live_leases'];
}
echo "reasons: ", json_encode(array_count_values($reasons)), "\n";
echo "ended by each request's end: ", min($ended), " to ", max($ended), "\n";
echo "live after each request: ", min($live), " to ", max($live), "\n";

// Only what is still held and live counts: not a lease released by the script, nor one
// released elsewhere by its token; a compound call's lease is held like any other.
$a = ratelimit_acquire('x', 10, 60, 5);
$b = ratelimit_acquire('x', 10, 60, 5);
$c = ratelimit_acquire_all('y', [['limit' => 10, 'per' => 60, 'scope' => 'a'], ['limit' => 10, 'per' => 60, 'scope' => 'b']], inflight: 1);
$e = ratelimit_acquire('z', 10, 60, 1);
var_dump(ratelimit_release($a));
$r = rl_run([], 'var_dump(ratelimit_release(getenv("RL_LEASE")));', ['env' => ['RL_LEASE' => $e->lease]]);
echo "released by another process: ", trim($r['out'] . $r['err']), "\n";
echo "live before the end: ", ratelimit_stats()['live_leases'], "\n";
echo "ended: ", ratelimit_end_request(), "\n";
echo "live after: ", ratelimit_stats()['live_leases'], "\n";
echo "ended again: ", ratelimit_end_request(), "\n";

// A lease taken after the last call still ends with the PHP request (the child's exit).
$r = rl_run([], '$d = ratelimit_acquire("late", 10, 60, 1); echo ratelimit_end_request(), " ", $d->reason, "\n"; $d = ratelimit_acquire("late", 10, 60, 1); echo $d->reason, "\n";');
echo "child: ", str_replace("\n", " / ", trim($r['out'] . $r['err'])), "\n";
echo "live after the child's end: ", ratelimit_stats()['live_leases'], "\n";
try {
    ratelimit_end_request(1);
} catch (ArgumentCountError $e) {
    echo get_class($e), ": ", $e->getMessage(), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('end_request_worker_loop');
?>
--EXPECT--
before any call (nothing open): 0
reasons: {"ok":100}
ended by each request's end: 1 to 1
live after each request: 0 to 0
bool(true)
released by another process: bool(true)
live before the end: 2
ended: 2
live after: 0
ended again: 0
child: 1 ok / ok
live after the child's end: 0
ArgumentCountError: ratelimit_end_request() expects exactly 0 arguments, 1 given
