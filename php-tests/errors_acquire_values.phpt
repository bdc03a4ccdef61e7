--TEST--
ratelimit_acquire(): ValueError for every argument out of its bounds; bounds themselves accepted; nothing allowed by an error
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$ok = 0;
$try = function (callable $fn) use (&$ok) {
    try {
        $d = $fn();
        echo "allowed=", var_export($d->allowed, true), "\n";
        $ok++;
    } catch (Throwable $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
};
echo "-- subject\n";
$try(fn() => ratelimit_acquire(''));
$try(fn() => ratelimit_acquire(str_repeat('s', 1025)));
$try(fn() => ratelimit_acquire(str_repeat('s', 1024)));
echo "-- limit\n";
$try(fn() => ratelimit_acquire('x', 0));
$try(fn() => ratelimit_acquire('x', -5));
$try(fn() => ratelimit_acquire('x', PHP_INT_MIN));
$try(fn() => ratelimit_acquire('x', 1000000000001));
$try(fn() => ratelimit_acquire('x', PHP_INT_MAX));
$try(fn() => ratelimit_acquire('ok-limit', 1000000000000));
echo "-- per\n";
$try(fn() => ratelimit_acquire('x', 5, NAN));
$try(fn() => ratelimit_acquire('x', 5, INF));
$try(fn() => ratelimit_acquire('x', 5, -INF));
$try(fn() => ratelimit_acquire('x', 5, 0.0));
$try(fn() => ratelimit_acquire('x', 5, -1.0));
$try(fn() => ratelimit_acquire('x', 5, 0.0009));
$try(fn() => ratelimit_acquire('x', 5, 1000000000.5));
$try(fn() => ratelimit_acquire('ok-per-min', 5, 0.001));
$try(fn() => ratelimit_acquire('ok-per-max', 5, 1e9));
echo "-- inflight\n";
$try(fn() => ratelimit_acquire('x', 5, 60, -1));
$try(fn() => ratelimit_acquire('x', 5, 60, PHP_INT_MIN));
echo "-- scope\n";
$try(fn() => ratelimit_acquire('x', 5, 60, 0, ''));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, str_repeat('a', 65)));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, 'a b'));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, 'a/b'));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, "caf\u{e9}"));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, "a\0b"));
$try(fn() => ratelimit_acquire('ok-scope', 5, 60, 0, str_repeat('a', 64)));
$try(fn() => ratelimit_acquire('ok-scope', 5, 60, 0, 'AZaz09_.:-'));
echo "-- cost\n";
$try(fn() => ratelimit_acquire('x', 5, 60, 0, 'c', 0));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, 'c', -3));
$try(fn() => ratelimit_acquire('x', 5, 60, 0, 'c', 6));
$try(fn() => ratelimit_acquire('x', null, 60, 0, 'c', 61));
$try(fn() => ratelimit_acquire('ok-cost', 5, 60, 0, 'c', 5));

// Only the accepted calls counted; no error created a bucket or allowed anything.
$s = ratelimit_stats();
echo "accepted: $ok, stats allowed: {$s['allowed']}, entries: {$s['entries']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_acquire_values');
?>
--EXPECT--
-- subject
ValueError: ratelimit_acquire(): Argument #1 ($subject) must not be empty
ValueError: ratelimit_acquire(): Argument #1 ($subject) must be at most 1024 bytes long
allowed=true
-- limit
ValueError: ratelimit_acquire(): Argument #2 ($limit) must be greater than 0
ValueError: ratelimit_acquire(): Argument #2 ($limit) must be greater than 0
ValueError: ratelimit_acquire(): Argument #2 ($limit) must be greater than 0
ValueError: ratelimit_acquire(): Argument #2 ($limit) must be less than or equal to 1000000000000
ValueError: ratelimit_acquire(): Argument #2 ($limit) must be less than or equal to 1000000000000
allowed=true
-- per
ValueError: ratelimit_acquire(): Argument #3 ($per) must be a finite number
ValueError: ratelimit_acquire(): Argument #3 ($per) must be a finite number
ValueError: ratelimit_acquire(): Argument #3 ($per) must be a finite number
ValueError: ratelimit_acquire(): Argument #3 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_acquire(): Argument #3 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_acquire(): Argument #3 ($per) must be greater than or equal to 0.001
ValueError: ratelimit_acquire(): Argument #3 ($per) must be less than or equal to 1000000000
allowed=true
allowed=true
-- inflight
ValueError: ratelimit_acquire(): Argument #4 ($inflight) must be greater than or equal to 0
ValueError: ratelimit_acquire(): Argument #4 ($inflight) must be greater than or equal to 0
-- scope
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
ValueError: ratelimit_acquire(): Argument #5 ($scope) must be 1 to 64 characters of [A-Za-z0-9_.:-]
allowed=true
allowed=true
-- cost
ValueError: ratelimit_acquire(): Argument #6 ($cost) must be greater than 0
ValueError: ratelimit_acquire(): Argument #6 ($cost) must be greater than 0
ValueError: ratelimit_acquire(): Argument #6 ($cost) must be less than or equal to argument #2 ($limit)
ValueError: ratelimit_acquire(): Argument #6 ($cost) must be less than or equal to argument #2 ($limit)
allowed=true
accepted: 7, stats allowed: 7, entries: 7
