--TEST--
ratelimit_release(): ValueError for a string that is not a lease token (version 1: "1" and 96 lowercase hexadecimal characters)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$bad = [
    '',
    'abc',
    str_repeat('a', 32),              // a bare lease id, without the bucket
    '1' . str_repeat('a', 95),
    '1' . str_repeat('a', 97),
    '1' . str_repeat('A', 96),
    '2' . str_repeat('a', 96),        // a version this build does not know
    '1' . str_repeat('0', 95) . 'g',
    '1' . str_repeat('0', 95) . ' ',
    ' 1' . str_repeat('0', 95),
    '1' . str_repeat('0', 95) . "\0",
    '1' . str_repeat('0', 96) . "\n",
    '0x' . str_repeat('0', 95),
];
foreach ($bad as $b) {
    rl_throws(fn() => ratelimit_release($b));
}
// An int is coerced to a string in non-strict mode, then refused the same way.
rl_throws(fn() => ratelimit_release(12345));
// A well-formed lease that does not exist is not an error.
var_dump(ratelimit_release('1' . str_repeat('0', 96)), ratelimit_release('1' . str_repeat('0123456789abcdef', 6)));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_release_values');
?>
--EXPECT--
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease returned by ratelimit_acquire()
bool(false)
bool(false)
