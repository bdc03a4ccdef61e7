--TEST--
php.ini: an invalid value is refused with a startup warning naming the directive, and the default stays
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-ini_invalid_values/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

$cases = [
    ['ratelimit.limit', 'abc', '60'],
    ['ratelimit.limit', '0', '60'],
    ['ratelimit.limit', '-3', '60'],
    ['ratelimit.limit', '1000000000001', '60'],
    ['ratelimit.per', 'abc', '60'],
    ['ratelimit.per', '0', '60'],
    ['ratelimit.per', '-5', '60'],
    ['ratelimit.inflight', 'abc', '0'],
    ['ratelimit.inflight', '-1', '0'],
    ['ratelimit.lease_ttl', 'abc', '60'],
    ['ratelimit.lease_ttl', '-1', '60'],
    ['ratelimit.busy_timeout_ms', 'abc', '100'],
    ['ratelimit.busy_timeout_ms', '-1', '100'],
    ['ratelimit.max_entries', 'abc', '100000'],
    ['ratelimit.max_entries', '0', '100000'],
    ['ratelimit.ipv6_prefix', 'abc', '64'],
    ['ratelimit.ipv6_prefix', '129', '64'],
    ['ratelimit.ipv6_prefix', '-1', '64'],
];
$code = 'echo "INI=", ini_get($argv[1] ?? getenv("RL_DIRECTIVE")), "\n";'
    . '$d = ratelimit_acquire("s" . getmypid());'
    . 'echo "limit=$d->limit lease=", $d->lease === null ? "none" : "yes", " ", $d->headers()["RateLimit-Policy"], "\n";';
$db = "$dir/db.sqlite";
foreach ($cases as [$name, $bad, $default]) {
    $r = rl_run(['ratelimit.db_path' => $db, $name => $bad], $code, ['inherit' => false, 'env' => ['RL_DIRECTIVE' => $name]]);
    $all = $r['out'] . $r['err'];
    $warned = preg_match('/Warning.*' . preg_quote($name, '/') . '\b/i', $all) === 1;
    preg_match('/^INI=(.*)$/m', $r['out'], $m);
    preg_match('/^limit=.*$/m', $r['out'], $b);
    echo "$name=$bad: warning ", $warned ? 'yes' : 'NO', ", ini_get ", ($m[1] ?? '?') === $default ? 'default' : 'NOT DEFAULT (' . ($m[1] ?? '?') . ')', ", ", $b[0] ?? 'no decision: ' . trim($all), "\n";
}
echo "-- a valid value: no warning\n";
$r = rl_run(['ratelimit.db_path' => $db, 'ratelimit.limit' => '5', 'ratelimit.per' => '2.5'], $code, ['inherit' => false, 'env' => ['RL_DIRECTIVE' => 'ratelimit.limit']]);
echo $r['out'], "stderr: ", var_export($r['err'], true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('ini_invalid_values');
?>
--EXPECT--
ratelimit.limit=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.limit=0: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.limit=-3: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.limit=1000000000001: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.per=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.per=0: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.per=-5: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.inflight=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.inflight=-1: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.lease_ttl=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.lease_ttl=-1: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.busy_timeout_ms=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.busy_timeout_ms=-1: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.max_entries=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.max_entries=0: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.ipv6_prefix=abc: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.ipv6_prefix=129: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
ratelimit.ipv6_prefix=-1: warning yes, ini_get default, limit=60 lease=none "default";q=60;w=60
-- a valid value: no warning
INI=5
limit=5 lease=none "default";q=5;w=3
stderr: ''
