--TEST--
declare(strict_types=1): no coercion (TypeError), except int for the float $per
--EXTENSIONS--
ratelimit
--FILE--
<?php
declare(strict_types=1);
require __DIR__ . '/_helpers.inc';
rl_isolate();

// $bool: the bool argument of the call, whose name in a TypeError depends on the PHP version
// (see rl_engine_wording()).
function t(callable $fn, ?bool $bool = null): void {
    try {
        $d = $fn();
        echo is_object($d) ? "allowed=" . var_export($d->allowed, true) : var_export($d, true), "\n";
    } catch (Throwable $e) {
        echo get_class($e), ': ', rl_engine_wording($e->getMessage(), $bool), "\n";
    }
}
t(fn() => ratelimit_acquire(123));
t(fn() => ratelimit_acquire('s', '3'));
t(fn() => ratelimit_acquire('s', 3.0));
t(fn() => ratelimit_acquire('s', true), true);
t(fn() => ratelimit_acquire('s', 3, '60'));
t(fn() => ratelimit_acquire('s', 3, 60, '1'));
t(fn() => ratelimit_acquire('s', 3, 60, 0, 5));
t(fn() => ratelimit_acquire('s', 3, 60, 0, 'default', '1'));
t(fn() => ratelimit_acquire('s', 3, 60, 0, 'default', 1.0));
t(fn() => ratelimit_peek(1));
t(fn() => ratelimit_peek('s', '3'));
t(fn() => ratelimit_reset('s', 5));
t(fn() => ratelimit_release(5));
// The union RateLimit\Decision|string: a message the extension writes itself.
t(fn() => ratelimit_release(true), true);
t(fn() => ratelimit_release(false), false);
t(fn() => ratelimit_release(null));
t(fn() => ratelimit_release(1.5));
// int for float is allowed even in strict mode, and null takes the default.
t(fn() => ratelimit_acquire('s', 3, 60));
t(fn() => ratelimit_acquire('s2', null, null, null));
echo "allowed in stats: ", ratelimit_stats()['allowed'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('args_strict_types');
?>
--EXPECT--
TypeError: ratelimit_acquire(): Argument #1 ($subject) must be of type string, int given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, string given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, float given
TypeError: ratelimit_acquire(): Argument #2 ($limit) must be of type ?int, <PHP's word for true> given
TypeError: ratelimit_acquire(): Argument #3 ($per) must be of type ?float, string given
TypeError: ratelimit_acquire(): Argument #4 ($inflight) must be of type ?int, string given
TypeError: ratelimit_acquire(): Argument #5 ($scope) must be of type string, int given
TypeError: ratelimit_acquire(): Argument #6 ($cost) must be of type int, string given
TypeError: ratelimit_acquire(): Argument #6 ($cost) must be of type int, float given
TypeError: ratelimit_peek(): Argument #1 ($subject) must be of type string, int given
TypeError: ratelimit_peek(): Argument #2 ($limit) must be of type ?int, string given
TypeError: ratelimit_reset(): Argument #2 ($scope) must be of type string, int given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, int given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, <PHP's word for true> given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, <PHP's word for false> given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, null given
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, float given
allowed=true
allowed=true
allowed in stats: 2
