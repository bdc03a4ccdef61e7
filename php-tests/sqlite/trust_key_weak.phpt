--TEST--
Trust: a key with too little variety (32 zero bytes, all bytes equal, fewer than 16 distinct bytes in 32, a repeated block) is refused as weak, naming the path and never the bytes; random, hex and 00..1f keys work
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-trust_key_weak/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

$probe = 'try { $d = ratelimit_acquire("Secret-Subject", 5, 60); echo "allowed=", var_export($d->allowed, true), "\n"; }'
    . ' catch (RateLimit\Exception $e) { echo "RateLimit\\\\Exception: ", $e->getMessage(), "\n"; }';
$block = implode('', array_map('chr', [3, 9, 27, 81, 243, 1, 5, 25, 125, 200, 33, 66, 99, 132, 165, 198]));
$keys = [
    'zero' => str_repeat("\0", 32),
    'equal' => str_repeat('A', 32),
    '15 distinct' => substr(str_repeat('abcdefghijklmno', 3), 0, 32),
    'block of 16 twice' => $block . $block,
    '16 distinct, no repetition' => $block . strrev($block),
    '00..1f' => implode('', array_map('chr', range(0, 31))),
    'hex of 32 random bytes' => bin2hex(random_bytes(32)),
    'random' => random_bytes(32),
];
foreach ($keys as $name => $bytes) {
    $path = "$dir/" . str_replace(' ', '_', $name) . '.key';
    file_put_contents($path, $bytes);
    chmod($path, 0600);
    // A database of its own for each key: one database is kept under one key.
    $r = rl_run(['ratelimit.key_file' => $path, 'ratelimit.db_path' => "$path.sqlite"], $probe);
    $out = str_replace($dir, 'DIR', trim($r['out'] . $r['err']));
    $leak = [];
    foreach (['raw' => $bytes, 'hex' => bin2hex($bytes), 'base64' => base64_encode($bytes)] as $form => $s) {
        if (str_contains($r['out'] . $r['err'], $s)) $leak[] = $form;
    }
    echo "$name: $out", $leak ? ' (shows the key: ' . implode(',', $leak) . ')' : '', "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('trust_key_weak');
?>
--EXPECT--
zero: RateLimit\Exception: ratelimit: key file DIR/zero.key holds a weak key: all 32 bytes are equal; make one with head -c 32 /dev/urandom
equal: RateLimit\Exception: ratelimit: key file DIR/equal.key holds a weak key: all 32 bytes are equal; make one with head -c 32 /dev/urandom
15 distinct: RateLimit\Exception: ratelimit: key file DIR/15_distinct.key holds a weak key: 15 distinct byte values in 32 bytes (at most 125 bits of variety, at least 128 wanted); make one with head -c 32 /dev/urandom
block of 16 twice: RateLimit\Exception: ratelimit: key file DIR/block_of_16_twice.key holds a weak key: its 32 bytes repeat a block of 16; make one with head -c 32 /dev/urandom
16 distinct, no repetition: allowed=true
00..1f: allowed=true
hex of 32 random bytes: allowed=true
random: allowed=true
