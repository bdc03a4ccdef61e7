--TEST--
Buckets (and leases) of different scopes are independent for the same subject
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$ip = '198.51.100.20';
$show = function (RateLimit\Decision $d) {
    echo "  $d->scope: ", $d->allowed ? 'allowed' : 'denied', " $d->reason remaining=$d->remaining\n";
};
echo "login exhausted:\n";
$show(ratelimit_acquire($ip, 1, 60, scope: 'login'));
$show(ratelimit_acquire($ip, 1, 60, scope: 'login'));
echo "other scopes untouched:\n";
$show(ratelimit_acquire($ip, 1, 60, scope: 'api'));
$show(ratelimit_acquire($ip, 1, 60));
$show(ratelimit_peek($ip, 1, 60, 'search'));
echo "in-flight slots per scope:\n";
$show(ratelimit_acquire($ip, 10, 60, 1, 'upload'));
$show(ratelimit_acquire($ip, 10, 60, 1, 'upload'));
$show(ratelimit_acquire($ip, 10, 60, 1, 'download'));
echo "reset of one scope:\n";
var_dump(ratelimit_reset($ip, 'login'));
$show(ratelimit_acquire($ip, 1, 60, scope: 'login'));
$show(ratelimit_acquire($ip, 1, 60, scope: 'api'));
var_dump(ratelimit_reset($ip, 'never-used'));
$s = ratelimit_stats();
echo "entries={$s['entries']} live_leases={$s['live_leases']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('scopes_independent');
?>
--EXPECT--
login exhausted:
  login: allowed ok remaining=0
  login: denied rate remaining=0
other scopes untouched:
  api: allowed ok remaining=0
  default: allowed ok remaining=0
  search: allowed ok remaining=1
in-flight slots per scope:
  upload: allowed ok remaining=9
  upload: denied inflight remaining=9
  download: allowed ok remaining=9
reset of one scope:
bool(true)
  login: allowed ok remaining=0
  api: denied rate remaining=0
bool(false)
entries=5 live_leases=2
