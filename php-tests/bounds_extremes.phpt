--TEST--
Extreme allowed inputs (limit 10^12, per 0.001 .. 10^9 s, cost = limit) work without overflow
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();
const T = 1000000000000;   // 10^12
const G = 1000000000;      // 10^9

echo "-- 10^12 tokens per ms, all taken at once\n";
$d = ratelimit_acquire('big-fast', T, 0.001, cost: T);
echo var_export($d->allowed, true), " remaining=$d->remaining limit=$d->limit\n";
printf("resetAfter %.4f\n", $d->resetAfter);
usleep(5000);
$p = ratelimit_peek('big-fast', T, 0.001);
echo "after 5 ms: remaining=$p->remaining resetAfter=$p->resetAfter\n";
$d = ratelimit_acquire('big-fast', T, 0.001, cost: T);
echo "again: ", var_export($d->allowed, true), "\n";

echo "-- 1 token per 10^9 s\n";
ratelimit_acquire('slow', 1, G);
$d = ratelimit_acquire('slow', 1, G);
echo "$d->reason ", $d->headers()['RateLimit-Policy'], " Retry-After: ", $d->headers()['Retry-After'], "\n";
rl_check('retryAfter ~1e9', $d->retryAfter > G - 10 && $d->retryAfter <= G, $d->retryAfter);
rl_check('resetAfter ~1e9', $d->resetAfter > G - 10 && $d->resetAfter <= G, $d->resetAfter);

// (t is rounded up: the next token is 1 ms away, and only a full bucket says t=0.)
echo "-- 10^12 tokens per 10^9 s (1000 per s)\n";
$d = ratelimit_acquire('big-slow', T, G, cost: T);
echo var_export($d->allowed, true), " remaining=$d->remaining\n";
rl_check('resetAfter ~1e9', $d->resetAfter > G - 10 && $d->resetAfter <= G, $d->resetAfter);
$d = ratelimit_acquire('big-slow', T, G, cost: 1000);
echo "cost 1000 at once: $d->reason\n";
rl_check('retryAfter <= 1 s', $d->retryAfter > 0.9 && $d->retryAfter <= 1.0, $d->retryAfter);
$d = ratelimit_acquire('big-slow2', T, G, cost: 1);
echo "one of 10^12: remaining=$d->remaining ", $d->headers()['RateLimit'], "\n";

echo "-- 1 token per 1 ms\n";
ratelimit_acquire('tiny', 1, 0.001);
usleep(3000);
$d = ratelimit_acquire('tiny', 1, 0.001);
echo "$d->reason ", $d->headers()['RateLimit-Policy'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('bounds_extremes');
?>
--EXPECT--
-- 10^12 tokens per ms, all taken at once
true remaining=0 limit=1000000000000
resetAfter 0.0010
after 5 ms: remaining=1000000000000 resetAfter=0
again: true
-- 1 token per 10^9 s
rate "default";q=1;w=1000000000 Retry-After: 1000000000
retryAfter ~1e9: ok
resetAfter ~1e9: ok
-- 10^12 tokens per 10^9 s (1000 per s)
true remaining=0
resetAfter ~1e9: ok
cost 1000 at once: rate
retryAfter <= 1 s: ok
one of 10^12: remaining=999999999999 "default";r=999999999999;t=1
-- 1 token per 1 ms
ok "default";q=1;w=1
