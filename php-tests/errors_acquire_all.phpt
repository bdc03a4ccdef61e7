--TEST--
ratelimit_acquire_all(): ValueError/TypeError for every bad element of $limits, naming its index, with ratelimit_acquire()'s texts; the other arguments' bounds; nothing charged by an error
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$try = function (callable $fn, mixed $given = null) {
    try {
        $d = $fn();
        echo "allowed=", var_export($d->allowed, true), "\n";
    } catch (Throwable $e) {
        echo get_class($e), ': ', rl_engine_wording($e->getMessage(), $given), "\n";
    }
};
$ok = ['limit' => 5, 'per' => 1, 'scope' => 'a'];
$with = fn(array $changes, array $drop = []) => array_diff_key(array_merge($ok, ['scope' => 'b'], $changes), array_flip($drop));
echo "-- the list\n";
$try(fn() => ratelimit_acquire_all('x', []));
$try(fn() => ratelimit_acquire_all('x', array_fill(0, 9, $ok)));
$try(fn() => ratelimit_acquire_all('x', [1 => $ok]));
$try(fn() => ratelimit_acquire_all('x', ['a' => $ok]));
$try(fn() => ratelimit_acquire_all('x', 'limits'));
$try(fn() => ratelimit_acquire_all('x', [$ok, 5]));
echo "-- keys\n";
$try(fn() => ratelimit_acquire_all('x', [$ok, $with([], ['per'])]));
$try(fn() => ratelimit_acquire_all('x', [$with([], ['limit'])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with([], ['scope'])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['interval' => 1])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with([0 => 1])]));
echo "-- limit\n";
$try(fn() => ratelimit_acquire_all('x', [$with(['limit' => 0])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['limit' => -1])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['limit' => 1000000000001])]));
$try(fn() => ratelimit_acquire_all('x', [$with(['limit' => '5'])]));
$try(fn() => ratelimit_acquire_all('x', [$with(['limit' => 5.0])]));
$try(fn() => ratelimit_acquire_all('x', [$with(['limit' => true])]), true);
$try(fn() => ratelimit_acquire_all('x', [$with(['limit' => null])]));
echo "-- per\n";
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['per' => 0.0005])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['per' => 0])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['per' => 1e10])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['per' => NAN])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['per' => '1'])]));
echo "-- scope\n";
$try(fn() => ratelimit_acquire_all('x', [$ok, $ok, $with(['scope' => 'a b'])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['scope' => ''])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['scope' => str_repeat('s', 65)])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['scope' => 7])]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['limit' => 9]), $with(['scope' => 'a'])]));
echo "-- the other arguments\n";
$try(fn() => ratelimit_acquire_all('', [$ok]));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['limit' => 2])], 0));
$try(fn() => ratelimit_acquire_all('x', [$ok, $with(['limit' => 2])], 3));
$try(fn() => ratelimit_acquire_all('x', [$ok], 1, -1));
$try(fn() => ratelimit_acquire_all('x', [$ok], 1, 0, ''));
$try(fn() => ratelimit_acquire_all('x', [$ok], 1, 0, str_repeat('r', 256)));
echo "-- bounds accepted\n";
$try(fn() => ratelimit_acquire_all('x', [['limit' => 1000000000000, 'per' => 1000000000, 'scope' => str_repeat('s', 64)], ['limit' => 2, 'per' => 0.001, 'scope' => 'b']], 2));
$try(fn() => ratelimit_acquire_all('y', array_map(fn($i) => ['limit' => 1, 'per' => 60, 'scope' => "s$i"], range(0, 7))));
echo "nothing charged by the errors: ", ratelimit_peek('x', 5, 1, 'a')->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_acquire_all');
?>
--EXPECT--
-- the list
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) must contain 1 to 8 limits
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) must contain 1 to 8 limits
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) must be a list
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) must be a list
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) must be of type array, string given
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [1] must be of type array, int given
-- keys
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1] must have a "per" key
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [0] must have a "limit" key
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1] must have a "scope" key
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1] must have only the keys "limit", "per", "scope", "policy" and "amount"
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1] must have only the keys "limit", "per", "scope", "policy" and "amount"
-- limit
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["limit"] must be greater than 0
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["limit"] must be greater than 0
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["limit"] must be less than or equal to 1000000000000
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["limit"] must be of type int, string given
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["limit"] must be of type int, float given
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["limit"] must be of type int, <PHP's word for true> given
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["limit"] must be of type int, null given
-- per
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["per"] must be greater than or equal to 0.001
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["per"] must be greater than or equal to 0.001
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["per"] must be less than or equal to 1000000000
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["per"] must be a finite number
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["per"] must be of type int|float, string given
-- scope
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["scope"] must not repeat the scope of [0]
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["scope"] must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["scope"] must be 1 to 64 characters of [A-Za-z0-9_.:-]
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [1]["scope"] must be of type string, int given
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [2]["scope"] must not repeat the scope of [0]
-- the other arguments
ValueError: ratelimit_acquire_all(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_acquire_all(): Argument #3 ($cost) must be greater than 0
ValueError: ratelimit_acquire_all(): Argument #3 ($cost) must be less than or equal to the smallest "limit" of argument #2 ($limits)
ValueError: ratelimit_acquire_all(): Argument #4 ($inflight) must be greater than or equal to 0
ValueError: ratelimit_acquire_all(): Argument #5 ($request_id) must not be empty
ValueError: ratelimit_acquire_all(): Argument #5 ($request_id) must be at most 255 bytes long
-- bounds accepted
allowed=true
allowed=true
nothing charged by the errors: 5
