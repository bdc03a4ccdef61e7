--TEST--
IP subjects: IPv4-mapped IPv6 shares the IPv4 bucket; IPv6 is cut to ratelimit.ipv6_prefix (64) bits; other strings are taken as they are
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// Each group: the first subject takes one token of 100; then every other form is peeked.
$groups = [
    'IPv4-mapped IPv6 is the IPv4 address' => ['1.2.3.4', '::ffff:1.2.3.4', '::FFFF:1.2.3.4', '::ffff:0102:0304', '0:0:0:0:0:ffff:1.2.3.4'],
    'one /64' => ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:5', '2001:db8:1:2::', '2001:db8:1:2:abcd::1'],
    '::/64 (IPv4-compatible is not mapped)' => ['::1', '::2', '0:0:0:0:0:0:0:1', '::1.2.3.4'],
];
$others = [
    '1.2.3.4' => ['1.2.3.5', ' 1.2.3.4', '1.2.3.4 ', '1.2.3.4:80', '::ffff:1.2.3.5'],
    '2001:db8:1:2::1' => ['2001:db8:1:3::1', '2001:db8:1:2::1/64', '[2001:db8:1:2::1]', '2001:db8:0:2::1'],
];
foreach ($groups as $label => $forms) {
    ratelimit_acquire($forms[0], 100, 3600);
    echo "$label:\n";
    foreach ($forms as $f) {
        echo "  ", var_export($f, true), " ", ratelimit_peek($f, 100, 3600)->remaining, "\n";
    }
}
echo "different buckets:\n";
foreach ($others as $base => $forms) {
    foreach ($forms as $f) {
        echo "  ", var_export($f, true), " ", ratelimit_peek($f, 100, 3600)->remaining, "\n";
    }
}
// Normalisation is per scope too: the mapped form in another scope is another bucket.
echo "other scope: ", ratelimit_peek('::ffff:1.2.3.4', 100, 3600, 'api')->remaining, "\n";
echo "entries: ", ratelimit_stats()['entries'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('ip_normalisation');
?>
--EXPECT--
IPv4-mapped IPv6 is the IPv4 address:
  '1.2.3.4' 99
  '::ffff:1.2.3.4' 99
  '::FFFF:1.2.3.4' 99
  '::ffff:0102:0304' 99
  '0:0:0:0:0:ffff:1.2.3.4' 99
one /64:
  '2001:db8:1:2::1' 99
  '2001:db8:1:2:ffff:ffff:ffff:ffff' 99
  '2001:0DB8:0001:0002:0:0:0:5' 99
  '2001:db8:1:2::' 99
  '2001:db8:1:2:abcd::1' 99
::/64 (IPv4-compatible is not mapped):
  '::1' 99
  '::2' 99
  '0:0:0:0:0:0:0:1' 99
  '::1.2.3.4' 99
different buckets:
  '1.2.3.5' 100
  ' 1.2.3.4' 100
  '1.2.3.4 ' 100
  '1.2.3.4:80' 100
  '::ffff:1.2.3.5' 100
  '2001:db8:1:3::1' 100
  '2001:db8:1:2::1/64' 100
  '[2001:db8:1:2::1]' 100
  '2001:db8:0:2::1' 100
other scope: 100
entries: 3
