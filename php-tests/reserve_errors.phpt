--TEST--
ratelimit_reserve(): $max_wait negative or NAN is a ValueError in PHP's words, INF is accepted; other arguments as ratelimit_acquire()'s; a booking's Decision has waitFor, others 0.0
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

rl_throws(fn() => ratelimit_reserve('e', -0.001));
rl_throws(fn() => ratelimit_reserve('e', -INF));
rl_throws(fn() => ratelimit_reserve('e', NAN));
rl_throws(fn() => ratelimit_reserve('', 1.0));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 0));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 0.0));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 60, 'bad scope'));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 60, 'default', 0));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 60, 'default', 6));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 60, 'default', 6, 'sliding_window'));
rl_throws(fn() => ratelimit_reserve('e', 1.0, 5, 60, 'default', 1, 'leaky'));
rl_throws(fn() => ratelimit_reserve('e', 'soon'));
$d = ratelimit_reserve('e', INF, 5, 60);
echo "INF: $d->reason waitFor=$d->waitFor reserved=$d->reserved lease=", var_export($d->lease, true), "\n";
$d = ratelimit_reserve('e', 0, 5, 60);
echo "0: $d->reason\n";
$d = ratelimit_reserve(max_wait: 2.5, subject: 'e', limit: 5, per: 60, cost: 3);
echo "named: $d->reason remaining=$d->remaining\n";
$d = ratelimit_acquire('e', 5, 60);
echo "acquire: $d->reason waitFor=", var_export($d->waitFor, true), " reserved=$d->reserved\n";
$d = ratelimit_reserve('e', 0.0, 5, 60);
echo "none left, no wait allowed: $d->reason waitFor=", var_export($d->waitFor, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('reserve_errors');
?>
--EXPECT--
ValueError: ratelimit_reserve(): Argument #2 ($max_wait) must be greater than or equal to 0
ValueError: ratelimit_reserve(): Argument #2 ($max_wait) must be greater than or equal to 0
ValueError: ratelimit_reserve(): Argument #2 ($max_wait) must be greater than or equal to 0
ValueError: ratelimit_reserve(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_reserve(): Argument #3 ($limit) must be greater than 0
ValueError: ratelimit_reserve(): Argument #4 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_reserve(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_reserve(): Argument #6 ($cost) must be greater than 0
ValueError: ratelimit_reserve(): Argument #6 ($cost) must be less than or equal to argument #3 ($limit) unless argument #7 ($policy) is "fixed_window"
ValueError: ratelimit_reserve(): Argument #6 ($cost) must be less than or equal to argument #3 ($limit) unless argument #7 ($policy) is "fixed_window"
ValueError: ratelimit_reserve(): Argument #7 ($policy) must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
TypeError: ratelimit_reserve(): Argument #2 ($max_wait) must be of type float, string given
INF: ok waitFor=0 reserved=0 lease=NULL
0: ok
named: ok remaining=0
acquire: rate waitFor=0.0 reserved=0
none left, no wait allowed: rate waitFor=0.0
