--TEST--
ratelimit_release(): ValueError for a string that is not 32 lowercase hexadecimal characters
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-errors_release_values/db.sqlite
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_test_dir();

$bad = [
    '',
    'abc',
    str_repeat('a', 31),
    str_repeat('a', 33),
    str_repeat('A', 32),
    str_repeat('0', 31) . 'g',
    str_repeat('0', 31) . ' ',
    ' ' . str_repeat('0', 31),
    str_repeat('0', 31) . "\0",
    str_repeat('0', 32) . "\n",
    '0x' . str_repeat('0', 30),
];
foreach ($bad as $b) {
    rl_throws(fn() => ratelimit_release($b));
}
// An int is coerced to a string in non-strict mode, then refused the same way.
rl_throws(fn() => ratelimit_release(12345));
// A well-formed lease that does not exist is not an error.
var_dump(ratelimit_release(str_repeat('0', 32)), ratelimit_release('0123456789abcdef0123456789abcdef'));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_release_values');
?>
--EXPECT--
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
ValueError: ratelimit_release(): Argument #1 ($lease) must be a lease of 32 lowercase hexadecimal characters
bool(false)
bool(false)
