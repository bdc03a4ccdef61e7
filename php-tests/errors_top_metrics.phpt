--TEST--
ratelimit_top() and ratelimit_metrics(): ValueError, TypeError and ArgumentCountError in PHP's own words
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

set_error_handler(function (int $no, string $msg) { echo "warning: $msg\n"; return true; });
rl_throws(fn() => ratelimit_top(0));
rl_throws(fn() => ratelimit_top(-1));
rl_throws(fn() => ratelimit_top(1001));
rl_throws(fn() => ratelimit_top(PHP_INT_MAX));
rl_throws(fn() => ratelimit_top(PHP_INT_MIN));
rl_throws(fn() => ratelimit_top('abc'));
rl_throws(fn() => ratelimit_top([]));
rl_throws(fn() => ratelimit_top(new stdClass));
rl_throws(fn() => ratelimit_top(1e20));
rl_throws(fn() => ratelimit_top(null));
rl_throws(fn() => ratelimit_top(1, 2));
rl_throws(fn() => ratelimit_top(m: 1));
rl_throws(fn() => ratelimit_metrics(1));
echo "-- coerced as for any built-in function\n";
var_dump(count(ratelimit_top('5')), count(ratelimit_top(1000)), count(ratelimit_top(1)), count(ratelimit_top(true)));
var_dump(count(ratelimit_top(2.5)));
echo "-- strict types in a child\n";
$r = rl_run([], 'declare(strict_types=1); try { ratelimit_top("5"); } catch (TypeError $e) { echo $e->getMessage(), "\n"; }');
echo trim($r['out']), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_top_metrics');
?>
--EXPECT--
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
TypeError: ratelimit_top(): Argument #1 ($n) must be of type int, string given
TypeError: ratelimit_top(): Argument #1 ($n) must be of type int, array given
TypeError: ratelimit_top(): Argument #1 ($n) must be of type int, stdClass given
TypeError: ratelimit_top(): Argument #1 ($n) must be of type int, float given
warning: ratelimit_top(): Passing null to parameter #1 ($n) of type int is deprecated
ValueError: ratelimit_top(): Argument #1 ($n) must be between 1 and 1000
ArgumentCountError: ratelimit_top() expects at most 1 argument, 2 given
Error: Unknown named parameter $m
ArgumentCountError: ratelimit_metrics() expects exactly 0 arguments, 1 given
-- coerced as for any built-in function
int(0)
int(0)
int(0)
int(0)
warning: Implicit conversion from float 2.5 to int loses precision
int(0)
-- strict types in a child
ratelimit_top(): Argument #1 ($n) must be of type int, string given
