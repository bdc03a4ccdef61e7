--TEST--
$inflight: at most that many live leases; reason "inflight" when tokens suffice, "rate" when they do not; retryAfter is the earliest lease expiry
--EXTENSIONS--
ratelimit
--INI--
ratelimit.lease_ttl=5
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$a = ratelimit_acquire('f', 10, 60, 2);
$b = ratelimit_acquire('f', 10, 60, 2);
echo "two leases: ", var_export($a->allowed && $b->allowed && $a->lease && $b->lease, true), "\n";
$c = ratelimit_acquire('f', 10, 60, 2);
echo "third: allowed=", var_export($c->allowed, true), " reason=$c->reason remaining=$c->remaining lease=", var_export($c->lease, true), "\n";
// An upper bound: seconds until the earliest live lease expires (lease_ttl=5).
rl_check('retryAfter ~ lease_ttl', $c->retryAfter > 4.0 && $c->retryAfter <= 5.0, $c->retryAfter);
rl_check('resetAfter ~12 (2 tokens of 10/60s)', $c->resetAfter > 11.5 && $c->resetAfter <= 12.0, $c->resetAfter);
// Retry-After is retryAfter rounded up, but never earlier than t (next token in ~6 s).
$h = $c->headers();
preg_match('/^"default";r=8;t=(\d+)$/', $h['RateLimit'], $m) or print("bad RateLimit: {$h['RateLimit']}\n");
rl_check('Retry-After = max(ceil(retryAfter), t)', $h['Retry-After'] === (string)max((int)ceil($c->retryAfter), (int)($m[1] ?? 0)), [$h, $c->retryAfter]);
echo "denial took no token: ", ratelimit_peek('f', 10, 60)->remaining, "\n";
// A larger $inflight on the same subject admits another one.
$d = ratelimit_acquire('f', 10, 60, 3);
echo "inflight 3: ", var_export($d->allowed, true), "\n";
ratelimit_release($d);

echo "-- tokens short and slots taken: rate\n";
$g = ratelimit_acquire('g', 1, 60, 1);
$g2 = ratelimit_acquire('g', 1, 60, 1);
echo "g2: $g2->reason\n";

echo "-- inflight 0: no lease, no slot limit\n";
for ($i = 0; $i < 3; $i++) {
    $h0 = ratelimit_acquire('h', 10, 60, 0);
    echo var_export($h0->allowed, true), " ", var_export($h0->lease, true), "\n";
}

echo "-- other subjects have their own slots\n";
echo var_export(ratelimit_acquire('f2', 10, 60, 2)->allowed, true), "\n";

$s = ratelimit_stats();
echo "denied_inflight={$s['denied_inflight']} denied_rate={$s['denied_rate']} live_leases={$s['live_leases']}\n";
ratelimit_release($a);
echo "after release: ", ratelimit_acquire('f', 10, 60, 2)->reason, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('inflight_denial');
?>
--EXPECT--
two leases: true
third: allowed=false reason=inflight remaining=8 lease=NULL
retryAfter ~ lease_ttl: ok
resetAfter ~12 (2 tokens of 10/60s): ok
Retry-After = max(ceil(retryAfter), t): ok
denial took no token: 8
inflight 3: true
-- tokens short and slots taken: rate
g2: rate
-- inflight 0: no lease, no slot limit
true NULL
true NULL
true NULL
-- other subjects have their own slots
true
denied_inflight=1 denied_rate=1 live_leases=4
after release: ok
