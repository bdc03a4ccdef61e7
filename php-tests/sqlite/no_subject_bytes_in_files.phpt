--TEST--
No subject byte reaches the database file or its WAL (text, IPv4/IPv6 in text or binary form)
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-no_subject_bytes_in_files/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

$subjects = ['Zq7-Distinctive-Subject-9xK', 'user@example.org', '198.51.100.77', '2001:db8:abcd:12::77', '::ffff:203.0.113.99'];
foreach ($subjects as $i => $s) {
    $l = ratelimit_acquire($s, 5, 60, 1, 'login');
    ratelimit_acquire($s, 5, 60, 1, 'api');
    ratelimit_peek($s, 5, 60, 'login');
    if ($i % 2) ratelimit_release($l);
}
ratelimit_reset('Zq7-Distinctive-Subject-9xK', 'api');
// A child writes too, and exits (checkpointing, if it does).
rl_run([], 'ratelimit_acquire("Zq7-Distinctive-Subject-9xK", 5, 60, 1, "login"); ratelimit_acquire("198.51.100.77", 5, 60);');

$needles = [
    'Zq7-Distinctive-Subject-9xK', 'Distinctive', 'user@example.org', '198.51.100.77', '2001:db8:abcd:12', '203.0.113.99',
    'ffff:203.0.113.99',
    inet_pton('198.51.100.77'), inet_pton('2001:db8:abcd:12::77'), substr(inet_pton('2001:db8:abcd:12::'), 0, 8), inet_pton('203.0.113.99'),
];
foreach (array_slice($needles, 0, 7) as $n) {   // also UTF-16 text
    $needles[] = implode("\0", str_split($n)) . "\0";
}
echo "wal exists: ", var_export(is_file("$dir/db.sqlite-wal"), true), "\n";
foreach (['db.sqlite', 'db.sqlite-wal', 'db.sqlite-shm', 'db.sqlite-journal'] as $f) {
    if (!is_file("$dir/$f")) continue;
    $raw = file_get_contents("$dir/$f");
    $hits = [];
    foreach ($needles as $n) {
        if (str_contains($raw, $n)) $hits[] = bin2hex($n);
    }
    echo "$f: ", $hits ? 'FOUND ' . implode(',', $hits) : 'clean', "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('no_subject_bytes_in_files');
?>
--EXPECTF--
wal exists: true
db.sqlite: clean
db.sqlite-wal: clean
%A
