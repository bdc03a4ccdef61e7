--TEST--
ratelimit_acquire() $request_id: null or omitted is no id; empty and longer than 255 bytes are ValueErrors in PHP's style; 255 bytes, binary bytes, ints (weak mode) and named arguments accepted; nothing allowed by an error
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$try = function (callable $fn) {
    try {
        $d = $fn();
        echo "allowed=", var_export($d->allowed, true), " remaining=$d->remaining\n";
    } catch (Throwable $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
};
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, ''));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, str_repeat('i', 256)));
$try(fn() => ratelimit_acquire('e', request_id: ''));
echo "-- nothing taken by the errors\n";
echo ratelimit_peek('e', 10, 60)->remaining, "\n";
echo "-- accepted\n";
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, str_repeat('i', 255)));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, str_repeat('i', 255)));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, "\0bin\xff"));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, "\0bin\xfe"));
$try(fn() => ratelimit_acquire('e', 10, 60, request_id: 42));
$try(fn() => ratelimit_acquire('e', 10, 60, request_id: '42'));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1, null));
$try(fn() => ratelimit_acquire('e', 10, 60, 0, 'default', 1));
$s = ratelimit_stats();
echo "allowed={$s['allowed']} retries={$s['retries']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_request_id');
?>
--EXPECT--
ValueError: ratelimit_acquire(): Argument #7 ($request_id) must not be empty
ValueError: ratelimit_acquire(): Argument #7 ($request_id) must be at most 255 bytes long
ValueError: ratelimit_acquire(): Argument #7 ($request_id) must not be empty
-- nothing taken by the errors
10
-- accepted
allowed=true remaining=9
allowed=true remaining=9
allowed=true remaining=8
allowed=true remaining=7
allowed=true remaining=6
allowed=true remaining=6
allowed=true remaining=5
allowed=true remaining=4
allowed=6 retries=2
