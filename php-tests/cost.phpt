--TEST--
$cost takes that many tokens; a denial takes nothing; retryAfter waits for $cost tokens
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// 10 tokens per 60 s: one token every 6 s.
$d = ratelimit_acquire('c', 10, 60, cost: 4);
echo "cost 4: ", var_export($d->allowed, true), " remaining=$d->remaining\n";
printf("  resetAfter %.3f\n", $d->resetAfter);
$d = ratelimit_acquire('c', 10, 60, cost: 7);
echo "cost 7: ", var_export($d->allowed, true), " $d->reason remaining=$d->remaining\n";
rl_check('  retryAfter ~6 (one token short)', $d->retryAfter > 5.9 && $d->retryAfter <= 6.0, $d->retryAfter);
$d = ratelimit_acquire('c', 10, 60, cost: 6);
echo "cost 6: ", var_export($d->allowed, true), " remaining=$d->remaining\n";
$d = ratelimit_acquire('c', 10, 60, cost: 3);
echo "cost 3: ", var_export($d->allowed, true), " $d->reason remaining=$d->remaining\n";
rl_check('  retryAfter ~18 (three tokens)', $d->retryAfter > 17.9 && $d->retryAfter <= 18.0, $d->retryAfter);
rl_check('  resetAfter ~60', $d->resetAfter > 59.9 && $d->resetAfter <= 60.0, $d->resetAfter);

// cost == limit on a fresh bucket.
$d = ratelimit_acquire('whole', 5, 10, cost: 5);
echo "cost=limit: ", var_export($d->allowed, true), " remaining=$d->remaining\n";
printf("  resetAfter %.3f\n", $d->resetAfter);
$d = ratelimit_acquire('whole', 5, 10);
echo "then cost 1: ", var_export($d->allowed, true), " $d->reason\n";

// A large cost on a large bucket.
$d = ratelimit_acquire('big', 1000000, 1000, cost: 999999);
echo "big: remaining=$d->remaining\n";

$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('cost');
?>
--EXPECT--
cost 4: true remaining=6
  resetAfter 24.000
cost 7: false rate remaining=6
  retryAfter ~6 (one token short): ok
cost 6: true remaining=0
cost 3: false rate remaining=0
  retryAfter ~18 (three tokens): ok
  resetAfter ~60: ok
cost=limit: true remaining=0
  resetAfter 10.000
then cost 1: false rate
big: remaining=1
allowed=4 denied_rate=3
