--TEST--
ratelimit_reserve() with INF on a fixed window: hits past the limit keep counting (Laravel's hit() returns 6, 7, 8), each told to wait for the window's end; "hit() > 5 aborts" admits exactly 5
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$attempts = [];
$admitted = 0;
for ($i = 0; $i < 8; $i++) {
    $d = ratelimit_reserve('l', INF, 5, 60, 'default', 1, 'fixed_window');
    $hits = $d->limit - $d->remaining + $d->reserved;
    $attempts[] = $hits;
    $admitted += $hits > 5 ? 0 : 1;
    if ($i === 4 || $i === 5) {
        rl_check("hit " . ($i + 1) . " waitFor", $i === 4 ? $d->waitFor === 0.0 : ($d->waitFor > 59.0 && $d->waitFor <= 60.0), $d->waitFor);
    }
}
echo "attempts: ", implode(',', $attempts), "\n";
echo "admitted: $admitted\n";
$p = ratelimit_peek('l', 5, 60, 'default', 'fixed_window');
echo "peek: remaining=$p->remaining reserved=$p->reserved allowed=", var_export($p->allowed, true), "\n";

// A finite wait shorter than the window's end is a denial that counts nothing.
$d = ratelimit_reserve('l', 30.0, 5, 60, 'default', 1, 'fixed_window');
echo "max 30 s: $d->reason reserved=$d->reserved\n";
// An amount past the limit is counted whole (Laravel's increment by more than its maximum).
$d = ratelimit_reserve('big', INF, 5, 60, 'default', 7, 'fixed_window');
echo "cost 7 of 5: $d->reason waitFor=$d->waitFor remaining=$d->remaining reserved=$d->reserved\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('reserve_forced_charge_fixed_window');
?>
--EXPECT--
hit 5 waitFor: ok
hit 6 waitFor: ok
attempts: 1,2,3,4,5,6,7,8
admitted: 5
peek: remaining=0 reserved=3 allowed=false
max 30 s: rate reserved=3
cost 7 of 5: ok waitFor=0 remaining=0 reserved=2
