--TEST--
Policy "stepped_bucket": $amount tokens back at each whole $per (Symfony's token_bucket), in ratelimit_acquire(), _peek(), _reserve() and _acquire_all(); a booking waits for its step; $amount's errors
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

function seen(RateLimit\Decision $d): string
{
    return sprintf('%s %s remaining=%d', $d->allowed ? 'allowed' : 'denied', $d->reason, $d->remaining);
}
/** Seconds $x is within [$lo, $hi]. */
function near(string $what, float $x, float $lo, float $hi): void
{
    rl_check($what, $x >= $lo && $x <= $hi, $x);
}

echo "-- 10, 2 more at each whole hour: the 11th waits for the first step, the 13th for the second\n";
$d = ratelimit_acquire('u', 10, 3600, scope: 'st', cost: 10, policy: 'stepped_bucket', amount: 2);
echo seen($d), "\n";
near('resetAfter: 5 steps', $d->resetAfter, 5 * 3600 - 5, 5 * 3600);
// (The larger cost first: a worker's deny cache answers a cost at least as high as the one it
// saw denied with that one's wait.)
$d = ratelimit_acquire('u', 10, 3600, scope: 'st', cost: 3, policy: 'stepped_bucket', amount: 2);
echo seen($d), "\n";
near('retryAfter of 3: the second step', $d->retryAfter, 7195, 7200);
$d = ratelimit_acquire('u', 10, 3600, scope: 'st', cost: 2, policy: 'stepped_bucket', amount: 2);
near('retryAfter of 2: the first step', $d->retryAfter, 3595, 3600);
echo 'peek: ', seen(ratelimit_peek('u', 10, 3600, 'st', 'stepped_bucket', 2)), "\n";

echo "-- reservations: 3 booked at the second step leave 1 there; the next 1 takes it, the next waits a step more\n";
$r = ratelimit_reserve('u', INF, 10, 3600, 'st', 3, 'stepped_bucket', 2);
echo seen($r), " reserved=$r->reserved\n";
near('waitFor of 3: the second step', $r->waitFor, 7195, 7200);
$r = ratelimit_reserve('u', INF, 10, 3600, 'st', 1, 'stepped_bucket', 2);
near('waitFor of 1 more: the same step', $r->waitFor, 7195, 7200);
$r = ratelimit_reserve('u', 7000, 10, 3600, 'st', 1, 'stepped_bucket', 2);
echo 'past the maximum wait: ', seen($r), "\n";
near('its retryAfter: the third step', $r->retryAfter, 10795, 10800);
$r = ratelimit_reserve('u', INF, 10, 3600, 'st', 1, 'stepped_bucket', 2);
near('waitFor of 1 more: the third step', $r->waitFor, 10795, 10800);
echo 'reserved: ', $r->reserved, "\n";

echo "-- the default amount is the limit; ratelimit_acquire_all() takes \"amount\"\n";
$d = ratelimit_acquire('v', 3, 60, scope: 'st2', cost: 3, policy: 'stepped_bucket');
$d = ratelimit_acquire('v', 3, 60, scope: 'st2', policy: 'stepped_bucket');
near('retryAfter: the step brings all 3', $d->retryAfter, 55, 60);
$c = ratelimit_acquire_all('w', [
    ['limit' => 5, 'per' => 3600, 'scope' => 'a', 'policy' => 'stepped_bucket', 'amount' => 1],
    ['limit' => 100, 'per' => 60, 'scope' => 'b'],
], 5);
echo seen($c), "\n";
$c = ratelimit_acquire_all('w', [
    ['limit' => 5, 'per' => 3600, 'scope' => 'a', 'policy' => 'stepped_bucket', 'amount' => 1],
    ['limit' => 100, 'per' => 60, 'scope' => 'b'],
]);
echo seen($c), "\n";
near('retryAfter: the first step of the tightest', $c->retryAfter, 3595, 3600);

echo "-- errors\n";
foreach ([
    fn () => ratelimit_acquire('u', 10, 60, amount: 2),
    fn () => ratelimit_acquire('u', 10, 60, policy: 'fixed_window', amount: 2),
    fn () => ratelimit_acquire('u', 10, 60, policy: 'stepped_bucket', amount: 0),
    fn () => ratelimit_acquire('u', 10, 60, policy: 'stepped_bucket', amount: 1000000000001),
    fn () => ratelimit_peek('u', 10, 60, policy: 'sliding_window', amount: 1),
    fn () => ratelimit_reserve('u', 1.0, 10, 60, policy: 'token_bucket', amount: 1),
    fn () => ratelimit_reserve('u', 1.0, 10, 60, cost: 11, policy: 'stepped_bucket'),
    fn () => ratelimit_acquire_all('u', [['limit' => 5, 'per' => 1, 'scope' => 'a', 'amount' => 1]]),
    fn () => ratelimit_acquire_all('u', [['limit' => 5, 'per' => 1, 'scope' => 'a', 'policy' => 'stepped_bucket', 'amount' => 0]]),
    fn () => ratelimit_acquire_all('u', [['limit' => 5, 'per' => 1, 'scope' => 'a', 'policy' => 'stepped_bucket', 'amount' => '1']]),
] as $f) {
    try {
        $f();
        echo "no error\n";
    } catch (Throwable $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
}
?>
--EXPECT--
-- 10, 2 more at each whole hour: the 11th waits for the first step, the 13th for the second
allowed ok remaining=0
resetAfter: 5 steps: ok
denied rate remaining=0
retryAfter of 3: the second step: ok
retryAfter of 2: the first step: ok
peek: denied rate remaining=0
-- reservations: 3 booked at the second step leave 1 there; the next 1 takes it, the next waits a step more
allowed ok remaining=0 reserved=3
waitFor of 3: the second step: ok
waitFor of 1 more: the same step: ok
past the maximum wait: denied rate remaining=0
its retryAfter: the third step: ok
waitFor of 1 more: the third step: ok
reserved: 5
-- the default amount is the limit; ratelimit_acquire_all() takes "amount"
retryAfter: the step brings all 3: ok
allowed ok remaining=0
denied rate remaining=0
retryAfter: the first step of the tightest: ok
-- errors
ValueError: ratelimit_acquire(): Argument #9 ($amount) must be null unless argument #8 ($policy) is "stepped_bucket"
ValueError: ratelimit_acquire(): Argument #9 ($amount) must be null unless argument #8 ($policy) is "stepped_bucket"
ValueError: ratelimit_acquire(): Argument #9 ($amount) must be greater than 0
ValueError: ratelimit_acquire(): Argument #9 ($amount) must be less than or equal to 1000000000000
ValueError: ratelimit_peek(): Argument #6 ($amount) must be null unless argument #5 ($policy) is "stepped_bucket"
ValueError: ratelimit_reserve(): Argument #8 ($amount) must be null unless argument #7 ($policy) is "stepped_bucket"
ValueError: ratelimit_reserve(): Argument #6 ($cost) must be less than or equal to argument #3 ($limit) unless argument #7 ($policy) is "fixed_window"
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["amount"] must not be given unless "policy" is "stepped_bucket"
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["amount"] must be greater than 0
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["amount"] must be of type int, string given
