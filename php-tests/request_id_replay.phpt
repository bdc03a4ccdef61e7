--TEST--
$request_id: a retry with the same id and terms is a replay ($replay true, source "replay", reason "ok"): it takes nothing, holds no lease (releasing it frees nothing), tells the bucket as it stands now, from any process; after request_ttl it is charged; the id is never stored in clear
--EXTENSIONS--
ratelimit
--INI--
ratelimit.request_ttl=3
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

function show(string $what, RateLimit\Decision $d): void {
    echo "$what: allowed=", var_export($d->allowed, true), " reason=$d->reason replay=", var_export($d->replay, true),
        " source=$d->source remaining=$d->remaining lease=", $d->lease === null ? 'null' : 'yes', "\n";
}

echo "-- without a lease\n";
$a = ratelimit_acquire('u', 5, 3600, 0, 'api', 1, 'key-1');
show('first', $a);
ratelimit_acquire('u', 5, 3600, 0, 'api');           // another call takes a token meanwhile
$b = ratelimit_acquire('u', 5, 3600, 0, 'api', 1, 'key-1');
show('retry', $b);
echo "as it stands now: ", var_export($b->remaining === ratelimit_peek('u', 5, 3600, 'api')->remaining, true),
    ", headers: ", $b->headers()['RateLimit'], ", no Retry-After: ", var_export(!isset($b->headers()['Retry-After']), true), "\n";
echo "releasing it frees nothing: ", var_export(ratelimit_release($b), true), "\n";

echo "-- with a lease, released by the first request: the retry is a replay without a slot\n";
$c = ratelimit_acquire('v', 5, 3600, 1, 'api', 1, 'job-7');
show('first', $c);
var_dump(ratelimit_release($c));
$d = ratelimit_acquire('v', 5, 3600, 1, 'api', 1, 'job-7');
show('retry', $d);
echo "releasing the replay: ", var_export(ratelimit_release($d), true), ", live_leases=", ratelimit_stats()['live_leases'], "\n";
$e = ratelimit_acquire('v', 5, 3600, 1, 'api', 1, 'job-8');
echo "another id takes the free slot: reason=$e->reason\n";

echo "-- from another process\n";
$r = rl_run([], '$d = ratelimit_acquire("u", 5, 3600, 0, "api", 1, "key-1"); echo var_export($d->replay, true), " ", $d->source, " ", $d->remaining, "\n";');
echo "child: ", trim($r['out']), "\n";

echo "-- the same id in another scope or of another subject is another request\n";
echo ratelimit_acquire('u', 5, 3600, 0, 'web', 1, 'key-1')->replay ? "replay" : "charged", " ",
    ratelimit_acquire('x', 5, 3600, 0, 'api', 1, 'key-1')->replay ? "replay" : "charged", "\n";

echo "-- after request_ttl (3 s) the retry is charged\n";
$tb = microtime(true);
$f = ratelimit_acquire('w', 5, 3600, 0, 'api', 1, 'post-1');
$g = ratelimit_acquire('w', 5, 3600, 0, 'api', 1, 'post-1');
rl_check('retried within request_ttl', microtime(true) - $tb < 3.0, microtime(true) - $tb);
echo "first=$f->remaining retry=$g->remaining replay=", var_export($g->replay, true), "\n";
rl_pause(3.05 - (microtime(true) - $tb));
$h = ratelimit_acquire('w', 5, 3600, 0, 'api', 1, 'post-1');
echo "after request_ttl: remaining=$h->remaining replay=", var_export($h->replay, true), "\n";
$s = ratelimit_stats();
echo "retries={$s['retries']} allowed={$s['allowed']}\n";

echo "-- no id in clear in the database\n";
$dir = rl_isolate();
$found = false;
foreach (glob("$dir/*") as $file) {
    if (is_file($file) && (str_contains(file_get_contents($file), 'post-1') || str_contains(file_get_contents($file), 'job-7'))) {
        $found = true;
    }
}
echo "found: ", var_export($found, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_replay');
?>
--EXPECT--
-- without a lease
first: allowed=true reason=ok replay=false source=store remaining=4 lease=null
retry: allowed=true reason=ok replay=true source=replay remaining=3 lease=null
as it stands now: true, headers: "api";r=3;t=720, no Retry-After: true
releasing it frees nothing: false
-- with a lease, released by the first request: the retry is a replay without a slot
first: allowed=true reason=ok replay=false source=store remaining=4 lease=yes
bool(true)
retry: allowed=true reason=ok replay=true source=replay remaining=4 lease=null
releasing the replay: false, live_leases=0
another id takes the free slot: reason=ok
-- from another process
child: true replay 3
-- the same id in another scope or of another subject is another request
charged charged
-- after request_ttl (3 s) the retry is charged
retried within request_ttl: ok
first=4 retry=4 replay=true
after request_ttl: remaining=3 replay=false
retries=4 allowed=8
-- no id in clear in the database
found: false
