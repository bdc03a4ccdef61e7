--TEST--
ratelimit_refund(): gives tokens back in one step, never past the limit; a window's count goes down, never below 0, an ended window is left alone; a missing bucket stays missing; a cached denial ends
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "-- no bucket\n";
var_dump(ratelimit_refund('nobody', 1, 3, 3600));
echo "entries: ", ratelimit_stats()['entries'], "\n";

echo "-- token_bucket\n";
ratelimit_acquire('t', 3, 3600, cost: 3);
echo "empty: ", ratelimit_acquire('t', 3, 3600)->reason, "\n";
var_dump(ratelimit_refund('t', 2, 3, 3600));
echo "remaining: ", ratelimit_peek('t', 3, 3600)->remaining, "\n";
var_dump(ratelimit_refund('t', 5, 3, 3600));
echo "remaining (the limit at most): ", ratelimit_peek('t', 3, 3600)->remaining, "\n";
var_dump(ratelimit_refund('t', 1, 3, 3600));

echo "-- a cached denial ends\n";
ratelimit_acquire('d', 1, 3600);
echo ratelimit_acquire('d', 1, 3600)->source, " ", ratelimit_acquire('d', 1, 3600)->source, "\n";
var_dump(ratelimit_refund('d', 1, 1, 3600));
$a = ratelimit_acquire('d', 1, 3600);
echo "after: ", var_export($a->allowed, true), " ", $a->source, "\n";

foreach (['fixed_window', 'sliding_window'] as $policy) {
    echo "-- $policy\n";
    for ($i = 0; $i < 3; $i++) {
        ratelimit_acquire("w-$policy", 3, 3600, policy: $policy);
    }
    var_dump(ratelimit_refund("w-$policy", 1, 3, 3600, policy: $policy));
    echo "remaining: ", ratelimit_peek("w-$policy", 3, 3600, policy: $policy)->remaining, "\n";
    var_dump(ratelimit_refund("w-$policy", 5, 3, 3600, policy: $policy));
    echo "remaining: ", ratelimit_peek("w-$policy", 3, 3600, policy: $policy)->remaining, "\n";
    var_dump(ratelimit_refund("w-$policy", 1, 3, 3600, policy: $policy));
}

echo "-- stepped_bucket\n";
ratelimit_acquire('st', 4, 3600, cost: 3, policy: 'stepped_bucket', amount: 2);
var_dump(ratelimit_refund('st', 2, 4, 3600, policy: 'stepped_bucket', amount: 2));
echo "remaining: ", ratelimit_peek('st', 4, 3600, policy: 'stepped_bucket', amount: 2)->remaining, "\n";
var_dump(ratelimit_refund('st', 5, 4, 3600, policy: 'stepped_bucket', amount: 2));
echo "remaining (the limit at most): ", ratelimit_peek('st', 4, 3600, policy: 'stepped_bucket', amount: 2)->remaining, "\n";

echo "-- an ended window is left alone\n";
ratelimit_acquire('e', 3, 0.2, policy: 'fixed_window');
ratelimit_acquire('e', 3, 0.2, policy: 'fixed_window');
usleep(400000);
var_dump(ratelimit_refund('e', 1, 3, 0.2, policy: 'fixed_window'));
echo "remaining: ", ratelimit_peek('e', 3, 0.2, policy: 'fixed_window')->remaining, "\n";

echo "-- a booking given back shortens the queue\n";
ratelimit_reserve('r', INF, 1, 3600);
ratelimit_reserve('r', INF, 1, 3600);
$b = ratelimit_reserve('r', INF, 1, 3600);
echo "booked: ", round($b->waitFor), "\n";
var_dump(ratelimit_refund('r', 1, 1, 3600));
echo "next: ", round(ratelimit_reserve('r', INF, 1, 3600)->waitFor), "\n";

echo "-- one scope only\n";
ratelimit_acquire('s', 2, 3600, scope: 'a');
ratelimit_acquire('s', 2, 3600, scope: 'b');
var_dump(ratelimit_refund('s', 1, 2, 3600, 'a'));
echo "a: ", ratelimit_peek('s', 2, 3600, 'a')->remaining, " b: ", ratelimit_peek('s', 2, 3600, 'b')->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('refund');
?>
--EXPECT--
-- no bucket
bool(false)
entries: 0
-- token_bucket
empty: rate
bool(true)
remaining: 2
bool(true)
remaining (the limit at most): 3
bool(false)
-- a cached denial ends
store deny_cache
bool(true)
after: true store
-- fixed_window
bool(true)
remaining: 1
bool(true)
remaining: 3
bool(false)
-- sliding_window
bool(true)
remaining: 1
bool(true)
remaining: 3
bool(false)
-- stepped_bucket
bool(true)
remaining: 3
bool(true)
remaining (the limit at most): 4
-- an ended window is left alone
bool(false)
remaining: 3
-- a booking given back shortens the queue
booked: 7200
bool(true)
next: 7200
-- one scope only
bool(true)
a: 2 b: 1
