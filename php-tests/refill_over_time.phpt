--TEST--
Refill: tokens come back continuously at $limit per $per seconds, up to $limit; retryAfter is when a retry succeeds
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// 2 tokens per second: one every 500 ms (long beside a busy machine's scheduling delays, so
// that "at once again" is at once).
ratelimit_acquire('r', 2, 1.0);
ratelimit_acquire('r', 2, 1.0);
$d = ratelimit_acquire('r', 2, 1.0);
echo "empty: $d->reason\n";
rl_check('retryAfter <= 0.5', $d->retryAfter > 0.0 && $d->retryAfter <= 0.5, $d->retryAfter);
usleep((int)($d->retryAfter * 1e6) + 15000);
$d = ratelimit_acquire('r', 2, 1.0);
echo "after retryAfter: $d->reason\n";
$d = ratelimit_acquire('r', 2, 1.0);
echo "at once again: $d->reason\n";

// Never more than $limit, however long the wait.
usleep(1100000);
$p = ratelimit_peek('r', 2, 1.0);
echo "after 1.1 s: remaining=$p->remaining resetAfter=$p->resetAfter\n";

// Over about 0.6 s, a bucket of 5 per 0.1 s admits at most 5 + 5 * elapsed / 0.1 calls (+1 for ms rounding),
// and not much fewer: close to the bound, or (a busy machine spacing the calls out, so that
// tokens overflow a full bucket) nearly every call.
$t = hrtime(true);
$n = 0;
for ($i = 0; $i < 3000 && rl_since($t) < 0.6; $i++) {
    $n += ratelimit_acquire('loop', 5, 0.1)->allowed ? 1 : 0;
    usleep(1000);
}
$el = rl_since($t);
$max = 5 + 5 * $el / 0.1;
rl_check('admitted within the bound', $n <= $max + 1, [$n, $max]);
rl_check('admitted close to the bound', $n >= min(0.8 * $max - 5, 0.8 * $i), [$n, $max, $i]);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('refill_over_time');
?>
--EXPECT--
empty: rate
retryAfter <= 0.5: ok
after retryAfter: ok
at once again: rate
after 1.1 s: remaining=2 resetAfter=0
admitted within the bound: ok
admitted close to the bound: ok
