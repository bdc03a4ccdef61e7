--TEST--
Arguments coerce as for any built-in function in non-strict mode: int for $per, numeric strings, int subject, bool
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// Numeric strings for $limit and $per.
$d = ratelimit_acquire('c1', '3', '60');
echo "c1: limit=", var_export($d->limit, true), " remaining=", $d->remaining, " ", $d->headers()['RateLimit-Policy'], "\n";
// An int for the float $per.
$d = ratelimit_acquire('c2', 2, 1);
echo "c2: ", $d->headers()['RateLimit-Policy'], "\n";
printf("c2 resetAfter %.3f\n", $d->resetAfter);
// Float-like numeric strings for $per.
$d = ratelimit_acquire('c3', 4, '0.5');
printf("c3 resetAfter %.3f %s\n", $d->resetAfter, $d->headers()['RateLimit-Policy']);
$d = ratelimit_acquire('c4', 1, '1e3');
echo "c4: ", $d->headers()['RateLimit-Policy'], "\n";
// An int subject is the string "12345": same bucket.
$d = ratelimit_acquire(12345, 2, 60);
echo "int subject remaining=", $d->remaining, "; as string: ", ratelimit_peek('12345', 2, 60)->remaining, "\n";
// Numeric strings for $inflight and $cost, an int for $scope.
$d = ratelimit_acquire('c5', '10', 60, '1', 123, '4');
echo "c5: remaining=", $d->remaining, " lease=", strlen((string)$d->lease), " scope=", var_export($d->scope, true), "\n";
var_dump(ratelimit_release($d));
// A float with an integral value for an int parameter; true for an int.
$d = ratelimit_acquire('c6', 5.0, 60, cost: 2.0);
echo "c6: limit=", var_export($d->limit, true), " remaining=", $d->remaining, "\n";
$d = ratelimit_acquire('c7', true, 60);
echo "c7: limit=", var_export($d->limit, true), "\n";
// peek and reset coerce too.
echo "peek: ", ratelimit_peek(12345, '2', '60')->remaining, "\n";
var_dump(ratelimit_reset(12345), ratelimit_reset('c5', 123));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('args_coercion');
?>
--EXPECT--
c1: limit=3 remaining=2 "default";q=3;w=60
c2: "default";q=2;w=1
c2 resetAfter 0.500
c3 resetAfter 0.125 "default";q=4;w=1
c4: "default";q=1;w=1000
int subject remaining=1; as string: 1
c5: remaining=6 lease=97 scope='123'
bool(true)
c6: limit=5 remaining=3
c7: limit=1
peek: 1
bool(true)
bool(true)
