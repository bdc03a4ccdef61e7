--TEST--
ratelimit_reset(): forgets one subject's bucket and leases in one scope; true only when there was something to forget
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

var_dump(ratelimit_reset('nobody'));

ratelimit_acquire('r', 2, 60);
ratelimit_acquire('r', 2, 60);
echo "before: ", ratelimit_acquire('r', 2, 60)->reason, "\n";
var_dump(ratelimit_reset('r'));
$d = ratelimit_acquire('r', 2, 60);
echo "after: ", var_export($d->allowed, true), " remaining=$d->remaining\n";
var_dump(ratelimit_reset('r'), ratelimit_reset('r'));
echo "entries: ", ratelimit_stats()['entries'], "\n";

echo "-- leases\n";
$l = ratelimit_acquire('l', 5, 60, 1);
echo "held: ", ratelimit_acquire('l', 5, 60, 1)->reason, " live_leases=", ratelimit_stats()['live_leases'], "\n";
var_dump(ratelimit_reset('l'));
echo "live_leases=", ratelimit_stats()['live_leases'], "\n";
$d = ratelimit_acquire('l', 5, 60, 1);
echo "after: ", var_export($d->allowed, true), " remaining=$d->remaining\n";
var_dump(ratelimit_release($l), ratelimit_release($d));

echo "-- one scope only\n";
ratelimit_acquire('s', 5, 60, scope: 'a');
ratelimit_acquire('s', 5, 60, scope: 'b');
var_dump(ratelimit_reset('s', 'a'));
echo "a: ", ratelimit_peek('s', 5, 60, 'a')->remaining, " b: ", ratelimit_peek('s', 5, 60, 'b')->remaining, "\n";
var_dump(ratelimit_reset('s'));
echo "b after reset of default: ", ratelimit_peek('s', 5, 60, 'b')->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('reset');
?>
--EXPECT--
bool(false)
before: rate
bool(true)
after: true remaining=1
bool(true)
bool(false)
entries: 0
-- leases
held: inflight live_leases=1
bool(true)
live_leases=0
after: true remaining=4
bool(false)
bool(true)
-- one scope only
bool(true)
a: 5 b: 4
bool(false)
b after reset of default: 4
