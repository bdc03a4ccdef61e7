--TEST--
Pseudonyms: the file stores first16(HMAC-SHA256(key, scope . "\0" . normalised subject)); published test vectors
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-pseudonym_test_vectors/db.sqlite
ratelimit.key_file={TMP}/rl-phpt-pseudonym_test_vectors/test.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$key = implode('', array_map('chr', range(0, 31)));   // 00 01 02 ... 1f
file_put_contents(ini_get('ratelimit.key_file'), $key);
chmod(ini_get('ratelimit.key_file'), 0600);

// The shared test vectors (tests/vectors/pseudonyms.tsv, also read by the Rust tests): key
// 000102...1f; each bucket row is [kind, scope, subject, normalised subject, pseudonym].
$vectors = [];
foreach (file(__DIR__ . '/../../tests/vectors/pseudonyms.tsv', FILE_IGNORE_NEW_LINES) as $line) {
    if ($line === '' || $line[0] === '#') continue;
    [$kind, $scope, $subject, $norm, $hex] = explode("\t", $line);
    if ($kind === 'bucket') $vectors[] = [$scope, $subject, $norm, $hex];
}
echo count($vectors), " bucket vectors\n";
foreach ($vectors as [$scope, $subject, $norm, $hex]) {
    if (substr(hash_hmac('sha256', "$scope\0$norm", $key), 0, 32) !== $hex) echo "bad vector $scope/$norm\n";
    ratelimit_acquire($subject, 10, 60, 0, $scope);
}
$raw = '';
foreach (['db.sqlite', 'db.sqlite-wal'] as $f) {
    if (is_file("$dir/$f")) $raw .= file_get_contents("$dir/$f");
}
$found = fn(string $hex) => str_contains($raw, hex2bin($hex)) || stripos($raw, $hex) !== false;
foreach ($vectors as [$scope, $subject, $norm, $hex]) {
    echo "$scope / $subject -> $norm: $hex stored: ", $found($hex) ? 'yes' : 'NO', "";
    if ($norm !== $subject) {
        $unnormalised = substr(hash_hmac('sha256', "$scope\0$subject", $key), 0, 32);
        echo ", pseudonym of the raw form stored: ", $found($unnormalised) ? 'YES' : 'no';
    }
    echo "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('pseudonym_test_vectors');
?>
--EXPECT--
8 bucket vectors
default / 192.0.2.1 -> 192.0.2.1: 0928313f14c5f6baaeb09789560fb916 stored: yes
login / 192.0.2.1 -> 192.0.2.1: 6ae230777448118889cc956a9a1f122c stored: yes
api / user-42 -> user-42: 1fc3b9cba9443d1f4d926b74bc41bd0d stored: yes
default / alice -> alice: a5a86d0192f383dbade39387e2c2cafa stored: yes
login / 203.0.113.7 -> 203.0.113.7: 5920008c3ccc67b51b02da543f8b324a stored: yes
api / ::ffff:192.0.2.1 -> 192.0.2.1: d27d55119a5773ec06df503db856045a stored: yes, pseudonym of the raw form stored: no
default / 2001:DB8:0:0:1:2:3:4 -> 2001:db8::: b557de0250dcad949b6ae5c07c37f36c stored: yes, pseudonym of the raw form stored: no
x / 2001:db8:1:2:3:4:5:6 -> 2001:db8:1:2::: c2c7d25140cbcfc4e3d4532a7cc1f934 stored: yes, pseudonym of the raw form stored: no
