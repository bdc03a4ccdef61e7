--TEST--
Subjects are binary-safe byte strings: NUL bytes, UTF-8 and 1024-byte subjects each have a bucket of their own
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$long = str_repeat('L', 1023);
$subjects = ["a\0b", 'a', "a\0c", "a\0", "caf\u{e9}", "cafe\u{301}", $long . 'x', $long . 'y', "\xff\xfe", ' '];
foreach ($subjects as $i => $s) {
    for ($j = 0; $j <= $i % 3; $j++) {
        ratelimit_acquire($s, 5, 60);
    }
}
foreach ($subjects as $i => $s) {
    echo bin2hex(substr($s, -4)), ': ', ratelimit_peek($s, 5, 60)->remaining, "\n";
}
echo "entries: ", ratelimit_stats()['entries'], "\n";
// The scope and the subject are separated: ("a", "b:c") and ("a:b", "c") are different buckets.
ratelimit_acquire('b', 5, 60, 0, 'a');
echo "scope/subject split: ", ratelimit_peek('b', 5, 60, 'a')->remaining, ' ', ratelimit_peek("b", 5, 60, 'a.')->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('subject_binary_safe');
?>
--EXPECT--
610062: 4
61: 3
610063: 2
6100: 4
6166c3a9: 3
6665cc81: 2
4c4c4c78: 4
4c4c4c79: 3
fffe: 2
20: 4
entries: 10
scope/subject split: 4 5
