--TEST--
ratelimit_peek() and ratelimit_reset(): ValueError for arguments out of bounds, with their own function names and argument numbers
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "-- peek\n";
rl_throws(fn() => ratelimit_peek(''));
rl_throws(fn() => ratelimit_peek(str_repeat('p', 1025)));
rl_throws(fn() => ratelimit_peek('p', 0));
rl_throws(fn() => ratelimit_peek('p', 1000000000001));
rl_throws(fn() => ratelimit_peek('p', 5, NAN));
rl_throws(fn() => ratelimit_peek('p', 5, 0.0));
rl_throws(fn() => ratelimit_peek('p', 5, 2e9));
rl_throws(fn() => ratelimit_peek('p', 5, 60, ''));
rl_throws(fn() => ratelimit_peek('p', 5, 60, 'no spaces'));
rl_throws(fn() => ratelimit_peek('p', 5, 60, str_repeat('s', 65)));
echo "-- reset\n";
rl_throws(fn() => ratelimit_reset(''));
rl_throws(fn() => ratelimit_reset(str_repeat('r', 1025)));
rl_throws(fn() => ratelimit_reset('r', ''));
rl_throws(fn() => ratelimit_reset('r', 'bad scope!'));
echo "-- accepted\n";
var_dump(ratelimit_peek(str_repeat('p', 1024), 5, 60, str_repeat('s', 64))->allowed);
var_dump(ratelimit_reset(str_repeat('r', 1024), str_repeat('s', 64)));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_peek_reset_values');
?>
--EXPECT--
-- peek
ValueError: ratelimit_peek(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_peek(): Argument #1 ($subject) must be at most 1024 bytes long
ValueError: ratelimit_peek(): Argument #2 ($limit) must be greater than 0
ValueError: ratelimit_peek(): Argument #2 ($limit) must be less than or equal to 1000000000000
ValueError: ratelimit_peek(): Argument #3 ($per) must be a finite number
ValueError: ratelimit_peek(): Argument #3 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_peek(): Argument #3 ($per) must be less than or equal to 1000000000
ValueError: ratelimit_peek(): Argument #4 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_peek(): Argument #4 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_peek(): Argument #4 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
-- reset
ValueError: ratelimit_reset(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_reset(): Argument #1 ($subject) must be at most 1024 bytes long
ValueError: ratelimit_reset(): Argument #2 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_reset(): Argument #2 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
-- accepted
bool(true)
bool(false)
