--TEST--
php.ini: every directive, their defaults, PHP_INI_SYSTEM (ini_set refused), and the defaults in use
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-ini_defaults/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();

$entries = (new ReflectionExtension('ratelimit'))->getINIEntries();
ksort($entries);
foreach ($entries as $k => $v) {
    if ($k === 'ratelimit.db_path') {
        $v = basename(dirname($v)) . '/' . basename($v);
    }
    echo "$k=", var_export($v, true), "\n";
}
echo "-- PHP_INI_SYSTEM\n";
foreach (ini_get_all('ratelimit') as $k => $info) {
    if ($info['access'] !== INI_SYSTEM) echo "$k: access {$info['access']}\n";
}
var_dump(ini_set('ratelimit.limit', '5'), ini_get('ratelimit.limit'));
var_dump(ini_set('ratelimit.db_path', '/tmp/elsewhere.sqlite') === false);
var_dump(ini_set('ratelimit.dry_run', '*') === false, ini_set('ratelimit.request_ttl', '5') === false, ini_set('ratelimit.request_replays', '5') === false);

echo "-- defaults in use\n";
$d = ratelimit_acquire('x');
echo "limit=$d->limit remaining=$d->remaining lease=", var_export($d->lease, true), " dryRun=", var_export($d->dryRun, true), " ", $d->headers()['RateLimit-Policy'], "\n";
printf("resetAfter %.3f\n", $d->resetAfter);
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('ini_defaults');
?>
--EXPECT--
ratelimit.backend='sqlite'
ratelimit.busy_timeout_ms='100'
ratelimit.db_path='rl-phpt-ini_defaults/db.sqlite'
ratelimit.dry_run=''
ratelimit.fail_open='0'
ratelimit.inflight='0'
ratelimit.ipv6_prefix='64'
ratelimit.key_file=''
ratelimit.key_file_previous=''
ratelimit.key_fingerprint=''
ratelimit.lease_ttl='60'
ratelimit.limit='60'
ratelimit.max_entries='100000'
ratelimit.per='60'
ratelimit.redis_allow_eviction='0'
ratelimit.redis_breaker_failures='5'
ratelimit.redis_breaker_retry_ms='1000'
ratelimit.redis_breaker_window_ms='10000'
ratelimit.redis_cluster=''
ratelimit.redis_fallback='none'
ratelimit.redis_prefix='rl:'
ratelimit.redis_sentinel=''
ratelimit.redis_sentinel_master=''
ratelimit.redis_timeout_ms='50'
ratelimit.redis_url='redis://127.0.0.1:6379/0'
ratelimit.redis_value_form='text'
ratelimit.request_replays='3'
ratelimit.request_ttl='60'
-- PHP_INI_SYSTEM
bool(false)
string(2) "60"
bool(true)
bool(true)
bool(true)
bool(true)
-- defaults in use
limit=60 remaining=59 lease=NULL dryRun=false "default";q=60;w=60
resetAfter 1.000
