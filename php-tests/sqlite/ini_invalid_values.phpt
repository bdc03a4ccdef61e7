--TEST--
php.ini: an invalid value is a startup warning naming the directive, and every call a RateLimit\Exception naming it (no other value, not even the default, stands in for it); a valid one is taken
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
    . 'try { $d = ratelimit_acquire("s" . getmypid());'
    . ' echo "limit=$d->limit lease=", $d->lease === null ? "none" : "yes", " ", $d->headers()["RateLimit-Policy"], "\n"; }'
    . ' catch (RateLimit\Exception $e) { echo "threw: ", $e->getMessage(), "\n"; }';
$db = "$dir/db.sqlite";
foreach ($cases as [$name, $bad, $default]) {
    $r = rl_run(['ratelimit.db_path' => $db, $name => $bad], $code, ['inherit' => false, 'env' => ['RL_DIRECTIVE' => $name]]);
    $all = $r['out'] . $r['err'];
    $warned = preg_match('/Warning.*' . preg_quote($name, '/') . '\b/i', $all) === 1;
    preg_match('/^INI=(.*)$/m', $r['out'], $m);
    preg_match('/^threw: (.*)$/m', $r['out'], $t);
    $named = str_contains($t[1] ?? '', "invalid php.ini value for $name (expected");
    echo "$name=$bad: warning ", $warned ? 'yes' : 'NO', ", ini_get ", ($m[1] ?? '?') === $bad ? 'as written' : 'NOT AS WRITTEN (' . ($m[1] ?? '?') . ')',
        ", ", $named ? 'every call throws naming it' : 'no exception naming it: ' . trim($all), "\n";
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
ratelimit.limit=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.limit=0: warning yes, ini_get as written, every call throws naming it
ratelimit.limit=-3: warning yes, ini_get as written, every call throws naming it
ratelimit.limit=1000000000001: warning yes, ini_get as written, every call throws naming it
ratelimit.per=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.per=0: warning yes, ini_get as written, every call throws naming it
ratelimit.per=-5: warning yes, ini_get as written, every call throws naming it
ratelimit.inflight=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.inflight=-1: warning yes, ini_get as written, every call throws naming it
ratelimit.lease_ttl=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.lease_ttl=-1: warning yes, ini_get as written, every call throws naming it
ratelimit.busy_timeout_ms=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.busy_timeout_ms=-1: warning yes, ini_get as written, every call throws naming it
ratelimit.max_entries=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.max_entries=0: warning yes, ini_get as written, every call throws naming it
ratelimit.ipv6_prefix=abc: warning yes, ini_get as written, every call throws naming it
ratelimit.ipv6_prefix=129: warning yes, ini_get as written, every call throws naming it
ratelimit.ipv6_prefix=-1: warning yes, ini_get as written, every call throws naming it
-- a valid value: no warning
INI=5
limit=5 lease=none "default";q=5;w=3
stderr: ''
