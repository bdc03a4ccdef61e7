--TEST--
ratelimit_acquire(): a bucket of $limit tokens admits $limit calls, then denies with reason "rate"
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$d = ratelimit_acquire('alice', 3, 60);
var_dump($d instanceof RateLimit\Decision, $d->allowed, $d->reason, $d->limit, $d->remaining,
    $d->retryAfter, $d->lease, $d->scope);
// A fresh bucket that gave one of 3 tokens refills it in 60 / 3 = 20 s.
printf("resetAfter %.3f\n", $d->resetAfter);

$d = ratelimit_acquire('alice', 3, 60);
echo "2nd: ", var_export($d->allowed, true), " ", $d->reason, " remaining=", $d->remaining, "\n";
rl_check('2nd resetAfter ~40', $d->resetAfter > 39.5 && $d->resetAfter <= 40.0, $d->resetAfter);
$d = ratelimit_acquire('alice', 3, 60);
echo "3rd: ", var_export($d->allowed, true), " ", $d->reason, " remaining=", $d->remaining, "\n";

$d = ratelimit_acquire('alice', 3, 60);
echo "4th: ", var_export($d->allowed, true), " ", $d->reason, " remaining=", $d->remaining,
    " limit=", $d->limit, " lease=", var_export($d->lease, true), "\n";
rl_check('4th retryAfter ~20', $d->retryAfter > 19.5 && $d->retryAfter <= 20.0, $d->retryAfter);
rl_check('4th resetAfter ~60', $d->resetAfter > 59.5 && $d->resetAfter <= 60.0, $d->resetAfter);

// Another subject has a bucket of its own.
$d = ratelimit_acquire('bob', 3, 60);
echo "bob: ", var_export($d->allowed, true), " ", $d->reason, " remaining=", $d->remaining, "\n";

// $limit/$per null take the php.ini defaults (60 per 60 s).
$d = ratelimit_acquire('carol');
echo "carol: limit=", $d->limit, " remaining=", $d->remaining, "\n";
printf("carol resetAfter %.3f\n", $d->resetAfter);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('acquire_basic');
?>
--EXPECT--
bool(true)
bool(true)
string(2) "ok"
int(3)
int(2)
float(0)
NULL
string(7) "default"
resetAfter 20.000
2nd: true ok remaining=1
2nd resetAfter ~40: ok
3rd: true ok remaining=0
4th: false rate remaining=0 limit=3 lease=NULL
4th retryAfter ~20: ok
4th resetAfter ~60: ok
bob: true ok remaining=2
carol: limit=60 remaining=59
carol resetAfter 1.000
