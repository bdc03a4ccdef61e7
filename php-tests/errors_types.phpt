--TEST--
TypeError and ArgumentCountError in PHP's own wording for arguments of the wrong type (non-strict mode)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "-- acquire\n";
rl_throws(fn() => ratelimit_acquire([]));
rl_throws(fn() => ratelimit_acquire(new stdClass));
rl_throws(fn() => ratelimit_acquire('t', 'abc'));
rl_throws(fn() => ratelimit_acquire('t', []));
rl_throws(fn() => ratelimit_acquire('t', 1e20));
rl_throws(fn() => ratelimit_acquire('t', 5, 'abc'));
rl_throws(fn() => ratelimit_acquire('t', 5, []));
rl_throws(fn() => ratelimit_acquire('t', 5, 60, 'x'));
rl_throws(fn() => ratelimit_acquire('t', 5, 60, 0, []));
rl_throws(fn() => ratelimit_acquire('t', 5, 60, 0, 'default', 'one'));
rl_throws(fn() => ratelimit_acquire('t', 5, 60, 0, 'default', 1, []));
rl_throws(fn() => ratelimit_acquire('t', 5, 60, 0, 'default', 1, new stdClass));
echo "-- peek, reset, release, stats\n";
rl_throws(fn() => ratelimit_peek([]));
rl_throws(fn() => ratelimit_peek('t', 'abc'));
rl_throws(fn() => ratelimit_peek('t', 5, 'abc'));
rl_throws(fn() => ratelimit_peek('t', 5, 60, []));
rl_throws(fn() => ratelimit_reset([]));
rl_throws(fn() => ratelimit_reset('t', new stdClass));
rl_throws(fn() => ratelimit_release([]));
rl_throws(fn() => ratelimit_release(new stdClass));
rl_throws(fn() => ratelimit_release(new ArrayObject([])));
echo "-- argument counts and names\n";
rl_throws(fn() => ratelimit_acquire());
rl_throws(fn() => ratelimit_acquire('t', 1, 1.0, 0, 'default', 1, 'id', 'stepped_bucket', 2, 'extra'));
rl_throws(fn() => ratelimit_release());
rl_throws(fn() => ratelimit_stats(1));
rl_throws(fn() => ratelimit_peek());
rl_throws(fn() => ratelimit_reset());
rl_throws(fn() => ratelimit_acquire('t', nope: 1));
rl_throws(fn() => ratelimit_acquire(limit: 1));
echo "-- nothing was counted\n";
$s = ratelimit_stats();
var_dump($s['allowed'], $s['entries']);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_types');
?>
--EXPECT--
-- acquire
TypeError: ratelimit_acquire(): Argument #1 ($subject) must be of type string, array given
TypeError: ratelimit_acquire(): Argument #1 ($subject) must be of type string, stdClass given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, string given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, array given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, float given
TypeError: ratelimit_acquire(): Argument #3 ($per) must be of type ?float, string given
TypeError: ratelimit_acquire(): Argument #3 ($per) must be of type ?float, array given
TypeError: ratelimit_acquire(): Argument #4 ($inflight) must be of type ?int, string given
TypeError: ratelimit_acquire(): Argument #5 ($scope) must be of type string, array given
TypeError: ratelimit_acquire(): Argument #6 ($cost) must be of type int, string given
TypeError: ratelimit_acquire(): Argument #7 ($request_id) must be of type ?string, array given
TypeError: ratelimit_acquire(): Argument #7 ($request_id) must be of type ?string, stdClass given
-- peek, reset, release, stats
TypeError: ratelimit_peek(): Argument #1 ($subject) must be of type string, array given
TypeError: ratelimit_peek(): Argument #2 ($limit) must be of type ?int, string given
TypeError: ratelimit_peek(): Argument #3 ($per) must be of type ?float, string given
TypeError: ratelimit_peek(): Argument #4 ($scope) must be of type string, array given
TypeError: ratelimit_reset(): Argument #1 ($subject) must be of type string, array given
TypeError: ratelimit_reset(): Argument #2 ($scope) must be of type string, stdClass given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, array given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, stdClass given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, ArrayObject given
-- argument counts and names
ArgumentCountError: ratelimit_acquire() expects at least 1 argument, 0 given
ArgumentCountError: ratelimit_acquire() expects at most 9 arguments, 10 given
ArgumentCountError: ratelimit_release() expects exactly 1 argument, 0 given
ArgumentCountError: ratelimit_stats() expects exactly 0 arguments, 1 given
ArgumentCountError: ratelimit_peek() expects at least 1 argument, 0 given
ArgumentCountError: ratelimit_reset() expects at least 1 argument, 0 given
Error: Unknown named parameter $nope
ArgumentCountError: ratelimit_acquire(): Argument #1 ($subject) not passed
-- nothing was counted
int(0)
int(0)
