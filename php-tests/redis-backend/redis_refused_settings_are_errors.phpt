--TEST--
Redis refusing the configuration (a database number it does not have, a user without the permission to run scripts, a wrong password) is a RateLimit\Exception on every call, never "unavailable" (which ratelimit.fail_open=1 would admit), and no message shows the password
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/../_helpers.inc'; if (rl_backend() !== 'redis') die('skip the Redis backend only (runs with RL_TEST_BACKEND=redis)'); ?>
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_isolate();
$url = getenv('RL_REDIS_URL');
$user = 'rl-phpt-noperm-' . getmypid();
$cli = 'redis-cli -u ' . escapeshellarg($url) . ' ';
exec($cli . "ACL SETUSER $user on '>s3cret-pw' '~*' '+@all' -evalsha -eval", $out, $rc);
echo "user made: ", var_export($rc === 0, true), "\n";
$with = fn(string $cred) => preg_replace('#^redis://#', "redis://$cred@", $url);
$cases = [
    'a database the server does not have' => preg_replace('#/\d+$#', '/9999', $url),
    'a user without EVALSHA' => $with("$user:s3cret-pw"),
    'a wrong password' => $with("$user:wrong-s3cret-pw"),
];
$code = '$n = ["admitted" => 0, "unavailable" => 0, "exception" => 0]; $m = "";'
    . ' for ($i = 0; $i < 12; $i++) { try { $d = ratelimit_acquire("x", 5, 60); $n[$d->reason === "unavailable" ? "unavailable" : "admitted"]++; }'
    . ' catch (RateLimit\Exception $e) { $n["exception"]++; $m = $e->getMessage(); } }'
    . ' echo json_encode($n), "\n", $m, "\n";';
foreach ($cases as $what => $bad) {
    $r = rl_run(['ratelimit.redis_url' => $bad, 'ratelimit.fail_open' => '1', 'ratelimit.redis_breaker_failures' => '2'], $code);
    [$counts, $msg] = explode("\n", $r['out']) + ['', ''];
    echo "$what: $counts; shows a password: ", var_export(str_contains($r['out'] . $r['err'], 's3cret'), true), "\n";
}
exec($cli . "ACL DELUSER $user");
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('redis_refused_settings_are_errors');
?>
--EXPECT--
user made: true
a database the server does not have: {"admitted":0,"unavailable":0,"exception":12}; shows a password: false
a user without EVALSHA: {"admitted":0,"unavailable":0,"exception":12}; shows a password: false
a wrong password: {"admitted":0,"unavailable":0,"exception":12}; shows a password: false
