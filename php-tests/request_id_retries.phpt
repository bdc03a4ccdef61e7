--TEST--
$request_id: a retry with the same id takes nothing (in this process and from another one) and gets the same answer and lease; a different id is charged; a denied call is not remembered; after the first request died of a fatal error its lease ended and the retry is decided afresh; without a lease the answer lasts ratelimit.request_ttl
--EXTENSIONS--
ratelimit
--INI--
ratelimit.request_ttl=3
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "-- the same id takes nothing\n";
$a = ratelimit_acquire('u', 2, 60, 1, 'api', 1, 'key-1');
$b = ratelimit_acquire('u', 2, 60, 1, 'api', 1, 'key-1');
echo "first: allowed=", var_export($a->allowed, true), " remaining=$a->remaining\n";
echo "retry: allowed=", var_export($b->allowed, true), " remaining=$b->remaining same lease=", var_export($a->lease === $b->lease && $a->lease !== null, true), "\n";
echo "peek: ", ratelimit_peek('u', 2, 60, 'api')->remaining, "\n";
echo "-- from another process\n";
$r = rl_run([], '$d = ratelimit_acquire("u", 2, 60, 1, "api", 1, "key-1"); echo var_export($d->allowed, true), " ", $d->remaining, " ", $d->lease, "\n";');
[$allowed, $remaining, $lease] = explode(' ', trim($r['out'])) + [null, null, null];
echo "child: allowed=$allowed remaining=$remaining same lease=", var_export($lease === $a->lease, true), "\n";
echo "the child's end released nothing: live_leases=", ratelimit_stats()['live_leases'], "\n";
echo "-- a different id is charged (and denied: the one slot is held)\n";
$c = ratelimit_acquire('u', 2, 60, 1, 'api', 1, 'key-2');
echo "key-2: allowed=", var_export($c->allowed, true), " reason=$c->reason\n";
echo "-- a denied call is not remembered: its retry is decided afresh\n";
ratelimit_release($a);
$c = ratelimit_acquire('u', 2, 60, 1, 'api', 1, 'key-2');
echo "key-2 again: allowed=", var_export($c->allowed, true), " reason=$c->reason remaining=$c->remaining\n";
echo "-- the first lease released, key-1 is decided afresh (no token left)\n";
$d = ratelimit_acquire('u', 2, 60, 1, 'api', 1, 'key-1');
echo "key-1: allowed=", var_export($d->allowed, true), " reason=$d->reason\n";

echo "-- the first request dies of a fatal error: its lease ends with it, the retry is decided afresh\n";
$r = rl_run([], '$d = ratelimit_acquire("v", 5, 60, 1, "api", 1, "job-7"); echo $d->remaining, "\n"; fflush(STDOUT); undefined_function_xyz();');
echo "died: remaining=", trim(strtok($r['out'], "\n")), " fatal=", var_export(str_contains($r['out'] . $r['err'], 'Fatal error'), true), "\n";
$d = ratelimit_acquire('v', 5, 60, 1, 'api', 1, 'job-7');
echo "retry: allowed=", var_export($d->allowed, true), " remaining=$d->remaining\n";
$e = ratelimit_acquire('v', 5, 60, 1, 'api', 1, 'job-7');
echo "its retry: remaining=$e->remaining same lease=", var_export($e->lease === $d->lease, true), "\n";

echo "-- without a lease: remembered for request_ttl (3 s), across processes\n";
$tb = microtime(true);
$d = ratelimit_acquire('w', 5, 60, 0, 'api', 1, 'post-1');
$ta = microtime(true); // the admission was between $tb and $ta
$r = rl_run([], 'echo ratelimit_acquire("w", 5, 60, 0, "api", 1, "post-1")->remaining, "\n";');
echo "first=$d->remaining child retry=", trim($r['out']), "\n";
echo "the same id in another scope or of another subject is another request: ",
    ratelimit_acquire('w', 5, 60, 0, 'web', 1, 'post-1')->remaining, " ",
    ratelimit_acquire('x', 5, 60, 0, 'api', 1, 'post-1')->remaining, "\n";
rl_check('the child retried within request_ttl', microtime(true) - $tb < 3.0, microtime(true) - $tb);
rl_pause(3.05 - (microtime(true) - $ta));
echo "after request_ttl: ", ratelimit_acquire('w', 5, 60, 0, 'api', 1, 'post-1')->remaining, "\n";
$s = ratelimit_stats();
echo "retries={$s['retries']}\n";
echo "-- no id in clear in the database\n";
$dir = rl_isolate();
$found = false;
foreach (glob("$dir/*") as $f) {
    if (is_file($f) && (str_contains(file_get_contents($f), 'post-1') || str_contains(file_get_contents($f), 'job-7'))) {
        $found = true;
    }
}
echo "found: ", var_export($found, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_retries');
?>
--EXPECT--
-- the same id takes nothing
first: allowed=true remaining=1
retry: allowed=true remaining=1 same lease=true
peek: 1
-- from another process
child: allowed=true remaining=1 same lease=true
the child's end released nothing: live_leases=1
-- a different id is charged (and denied: the one slot is held)
key-2: allowed=false reason=inflight
-- a denied call is not remembered: its retry is decided afresh
key-2 again: allowed=true reason=ok remaining=0
-- the first lease released, key-1 is decided afresh (no token left)
key-1: allowed=false reason=rate
-- the first request dies of a fatal error: its lease ends with it, the retry is decided afresh
died: remaining=4 fatal=true
retry: allowed=true remaining=3
its retry: remaining=3 same lease=true
-- without a lease: remembered for request_ttl (3 s), across processes
first=4 child retry=4
the same id in another scope or of another subject is another request: 4 4
the child retried within request_ttl: ok
after request_ttl: 3
retries=4
-- no id in clear in the database
found: false
