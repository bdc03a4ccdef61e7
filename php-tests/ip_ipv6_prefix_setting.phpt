--TEST--
ratelimit.ipv6_prefix: 128 keeps every IPv6 address apart (still in one canonical form), 48 groups a /48
--EXTENSIONS--
ratelimit
--INI--
ratelimit.ipv6_prefix=128
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();

echo "prefix ", ini_get('ratelimit.ipv6_prefix'), ":\n";
ratelimit_acquire('2001:db8::1', 100, 3600);
ratelimit_acquire('1.2.3.4', 100, 3600);
foreach (['2001:db8::1', '2001:0db8:0000:0000:0000:0000:0000:0001', '2001:DB8::0:1', '2001:db8::2', '2001:db8::1:1', '1.2.3.4', '::ffff:1.2.3.4'] as $f) {
    echo "  ", var_export($f, true), " ", ratelimit_peek($f, 100, 3600)->remaining, "\n";
}

// Another store, prefix 48, in a child.
$code = 'ratelimit_acquire("2001:db8:aa:1::1", 100, 3600);'
    . 'foreach (["2001:db8:aa:1::1", "2001:db8:aa:ffff::9", "2001:db8:aa::", "2001:db8:ab:1::1", "2001:db8:a:1::1"] as $f)'
    . ' echo "  ", var_export($f, true), " ", ratelimit_peek($f, 100, 3600)->remaining, "\n";';
mkdir("$dir/p48");
$r = rl_run(rl_backend_ini('ip_ipv6_prefix_setting-p48', "$dir/p48") + ['ratelimit.ipv6_prefix' => '48'], $code);
echo "prefix 48:\n", $r['out'], $r['err'];
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('ip_ipv6_prefix_setting');
?>
--EXPECT--
prefix 128:
  '2001:db8::1' 99
  '2001:0db8:0000:0000:0000:0000:0000:0001' 99
  '2001:DB8::0:1' 99
  '2001:db8::2' 100
  '2001:db8::1:1' 100
  '1.2.3.4' 99
  '::ffff:1.2.3.4' 99
prefix 48:
  '2001:db8:aa:1::1' 99
  '2001:db8:aa:ffff::9' 99
  '2001:db8:aa::' 99
  '2001:db8:ab:1::1' 100
  '2001:db8:a:1::1' 100
