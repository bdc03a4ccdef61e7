--TEST--
ratelimit_reserve(): the booked token is earned exactly when waitFor says: owed before, paid then (the booking took it: a plain call still waits for the next one)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// 5 per 10 s: a token every 2 s.
for ($i = 0; $i < 5; $i++) {
    ratelimit_acquire('w', 5, 10);
}
$t = microtime(true);
$d = ratelimit_reserve('w', 3.0, 5, 10);
echo "booked: $d->reason remaining=$d->remaining reserved=$d->reserved\n";
rl_check('waitFor is the next token', $d->waitFor > 1.5 && $d->waitFor <= 2.0, $d->waitFor);
$at = $t + $d->waitFor;

// Halfway: the token is still owed.
rl_pause(max(0.0, $at - 1.0 - microtime(true)));
$p = ratelimit_peek('w', 5, 10);
echo "a second before: remaining=$p->remaining reserved=$p->reserved\n";

// Just past the instant: owed no more, and the bucket holds nothing (the booking took it).
rl_pause(max(0.0, $at + 0.05 - microtime(true)));
$p = ratelimit_peek('w', 5, 10);
echo "after: remaining=$p->remaining reserved=$p->reserved\n";
$a = ratelimit_acquire('w', 5, 10);
echo "acquire: $a->reason\n";
rl_check('the next token is one interval later', $a->retryAfter > 1.0 && $a->retryAfter <= 1.95, $a->retryAfter);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('reserve_wait_is_exact');
?>
--EXPECT--
booked: ok remaining=0 reserved=1
waitFor is the next token: ok
a second before: remaining=0 reserved=1
after: remaining=0 reserved=0
acquire: rate
the next token is one interval later: ok
