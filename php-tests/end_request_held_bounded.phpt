--TEST--
A worker whose requests never end keeps at most 1024 leases for the end of its request: the oldest is let go of (not released), said once in the log, and ends at lease_ttl
--EXTENSIONS--
ratelimit
--INI--
ratelimit.lease_ttl=1
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();

$tokens = [];
for ($i = 0; $i < 1030; $i++) {
    $tokens[] = ratelimit_acquire('busy', 5000, 60, 5000)->lease;
}
echo "live: ", ratelimit_stats()['live_leases'], "\n";
// The six oldest are no longer held: still live (in use, for all the limiter knows).
echo "ended: ", ratelimit_end_request(), "\n";
echo "live after the end: ", ratelimit_stats()['live_leases'], "\n";
echo "the oldest still live: ", json_encode(array_map(fn($t) => ratelimit_release($t), array_slice($tokens, 0, 2))), "\n";
usleep(1100000);
// The next write to the bucket ends (and counts) the expired ones.
echo "after lease_ttl: ", ratelimit_acquire('busy', 5000, 60, 1)->reason;
$s = ratelimit_stats();
echo ", live {$s['live_leases']}, expired {$s['leases_expired']}\n";
$log = (string)@file_get_contents("$dir/php-errors.log");
echo "log lines: ", substr_count($log, 'a request holds too many leases'), "\n";
echo "names the bound and the remedy: ", var_export(str_contains($log, '1024 leases held') && str_contains($log, 'ratelimit_end_request()'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('end_request_held_bounded');
?>
--EXPECT--
live: 1030
ended: 1024
live after the end: 6
the oldest still live: [true,true]
after lease_ttl: ok, live 1, expired 4
log lines: 1
names the bound and the remedy: true
