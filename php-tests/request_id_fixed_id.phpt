--TEST--
$request_id: one id sent 500 times (the attack of issue 20, limit 5 per hour) gets exactly the limit in admissions, each replayed at most request_replays (3) times and flagged, the rest denied; ratelimit_acquire_all the same; with inflight 1 never a second lease
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

function tally(callable $call, int $n): string {
    $t = ['admitted' => 0, 'replays' => 0, 'denied' => 0, 'leases' => 0];
    for ($i = 0; $i < $n; $i++) {
        $d = $call();
        if ($d->replay) {
            $t['replays']++;
        } elseif ($d->allowed) {
            $t['admitted']++;
        } else {
            $t['denied']++;
        }
        $t['leases'] += $d->lease !== null;
    }
    return json_encode($t);
}
echo "acquire: ", tally(fn() => ratelimit_acquire('attacker', 5, 3600, 0, 'orders', 1, 'fixed'), 500), "\n";
echo "acquire_all: ", tally(fn() => ratelimit_acquire_all('attacker2', [
    ['limit' => 5, 'per' => 3600, 'scope' => 'orders'],
    ['limit' => 100, 'per' => 86400, 'scope' => 'orders-day'],
], 1, 0, 'fixed'), 500), "\n";
echo "tokens left: ", ratelimit_peek('attacker', 5, 3600, 'orders')->remaining, " ", ratelimit_peek('attacker2', 100, 86400, 'orders-day')->remaining, "\n";
echo "inflight 1, lease held: ", tally(fn() => ratelimit_acquire('attacker3', 5, 3600, 1, 'orders', 1, 'fixed'), 100), "\n";
$s = ratelimit_stats();
echo "allowed={$s['allowed']} retries={$s['retries']} denied_rate={$s['denied_rate']} denied_in_progress={$s['denied_in_progress']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_fixed_id');
?>
--EXPECT--
acquire: {"admitted":5,"replays":15,"denied":480,"leases":0}
acquire_all: {"admitted":5,"replays":15,"denied":480,"leases":0}
tokens left: 0 95
inflight 1, lease held: {"admitted":1,"replays":0,"denied":99,"leases":1}
allowed=11 retries=30 denied_rate=960 denied_in_progress=99
