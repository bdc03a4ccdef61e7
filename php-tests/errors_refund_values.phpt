--TEST--
ratelimit_refund(): ValueError and TypeError for arguments out of bounds or of the wrong type, with its own name and argument numbers
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

rl_throws(fn() => ratelimit_refund(''));
rl_throws(fn() => ratelimit_refund(str_repeat('r', 1025)));
rl_throws(fn() => ratelimit_refund('r', 0));
rl_throws(fn() => ratelimit_refund('r', -1));
rl_throws(fn() => ratelimit_refund('r', 1000000000001));
rl_throws(fn() => ratelimit_refund('r', 1, 0));
rl_throws(fn() => ratelimit_refund('r', 1, 1000000000001));
rl_throws(fn() => ratelimit_refund('r', 1, 5, NAN));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 0.0));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 60, 'bad scope!'));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 60, 'default', 'leaky_bucket'));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 60, 'default', 'token_bucket', 2));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 60, 'default', 'stepped_bucket', 0));
rl_throws(fn() => ratelimit_refund([]));
rl_throws(fn() => ratelimit_refund('r', 'x'));
rl_throws(fn() => ratelimit_refund('r', 1, 5, 60, []));
echo "-- accepted\n";
var_dump(ratelimit_refund(str_repeat('r', 1024), 1000000000000, 1, 60, str_repeat('s', 64), 'sliding_window'));
var_dump(ratelimit_refund('r', limit: 5, per: 60, policy: 'fixed_window'));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_refund_values');
?>
--EXPECT--
ValueError: ratelimit_refund(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_refund(): Argument #1 ($subject) must be at most 1024 bytes long
ValueError: ratelimit_refund(): Argument #2 ($cost) must be greater than 0
ValueError: ratelimit_refund(): Argument #2 ($cost) must be greater than 0
ValueError: ratelimit_refund(): Argument #2 ($cost) must be less than or equal to 1000000000000
ValueError: ratelimit_refund(): Argument #3 ($limit) must be greater than 0
ValueError: ratelimit_refund(): Argument #3 ($limit) must be less than or equal to 1000000000000
ValueError: ratelimit_refund(): Argument #4 ($per) must be a finite number
ValueError: ratelimit_refund(): Argument #4 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_refund(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_refund(): Argument #6 ($policy) must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
ValueError: ratelimit_refund(): Argument #7 ($amount) must be null unless argument #6 ($policy) is "stepped_bucket"
ValueError: ratelimit_refund(): Argument #7 ($amount) must be greater than 0
TypeError: ratelimit_refund(): Argument #1 ($subject) must be of type string, array given
TypeError: ratelimit_refund(): Argument #2 ($cost) must be of type int, string given
TypeError: ratelimit_refund(): Argument #5 ($scope) must be of type string, array given
-- accepted
bool(false)
bool(false)
