--TEST--
Policies: $policy of ratelimit_acquire() and ratelimit_peek(), "policy" of ratelimit_acquire_all()'s limits: windows, their headers, leases and request ids, a policy change, errors
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

echo "-- fixed_window: 2 per 60 s from the first admission; resetAfter and Retry-After to its end\n";
for ($i = 0; $i < 3; $i++) {
    $d = ratelimit_acquire('u', 2, 60, scope: 'fw', policy: 'fixed_window');
    echo seen($d), "\n";
}
near('retryAfter: the window end', $d->retryAfter, 59.5, 60.0);
near('resetAfter: the window end', $d->resetAfter, 59.5, 60.0);
$h = $d->headers();
echo $h['RateLimit-Policy'], ' | ', $h['RateLimit'], ' | ', $h['Retry-After'], "\n";
$p = ratelimit_peek('u', 2, 60, 'fw', 'fixed_window');
echo 'peek: ', seen($p), "\n";
echo 'peek of a fresh window: ', seen(ratelimit_peek('v', 2, 60, 'fw', 'fixed_window')),
    ' resetAfter=', ratelimit_peek('v', 2, 60, 'fw', 'fixed_window')->resetAfter, "\n";

echo "-- sliding_window: 2 per 60 s; the current window's 2 weigh whole until its end\n";
for ($i = 0; $i < 3; $i++) {
    $d = ratelimit_acquire('u', 2, 60, scope: 'sw', policy: 'sliding_window');
    echo seen($d), "\n";
}
// At the window's end they weigh floor(2 * 60000 / 60000) = 2, a millisecond later 1.
near('retryAfter: just past the window end', $d->retryAfter, 59.5, 60.001);
near('resetAfter: when the weight is 0', $d->resetAfter, 89.5, 90.001);

echo "-- another policy on an existing bucket keeps what it has available\n";
ratelimit_acquire('u', 5, 60, scope: 'change', cost: 3);
$d = ratelimit_acquire('u', 5, 60, scope: 'change', policy: 'fixed_window');
echo seen($d), "\n";
$d = ratelimit_acquire('u', 5, 60, scope: 'change', policy: 'fixed_window');
echo seen($d), "\n";
$d = ratelimit_acquire('u', 5, 60, scope: 'change', policy: 'fixed_window');
echo seen($d), "\n";
near('the window starts at the change', $d->retryAfter, 59.5, 60.0);
echo 'back to token_bucket: ', seen(ratelimit_acquire('u', 5, 60, scope: 'change')), "\n";

echo "-- leases and request ids with a window\n";
$a = ratelimit_acquire('l', 10, 60, inflight: 1, scope: 'lease', policy: 'sliding_window');
$b = ratelimit_acquire('l', 10, 60, inflight: 1, scope: 'lease', policy: 'sliding_window');
echo seen($a), ' lease=', $a->lease !== null ? 'yes' : 'no', ' | ', seen($b), "\n";
var_dump(ratelimit_release($a));
echo seen(ratelimit_acquire('l', 10, 60, inflight: 1, scope: 'lease', policy: 'sliding_window')), "\n";
$r1 = ratelimit_acquire('r', 1, 60, scope: 'req', request_id: 'K', policy: 'fixed_window');
$r2 = ratelimit_acquire('r', 1, 60, scope: 'req', request_id: 'K', policy: 'fixed_window');
$r3 = ratelimit_acquire('r', 1, 60, scope: 'req', request_id: 'K', policy: 'sliding_window');
echo seen($r1), ' | replay: ', seen($r2), ' ', var_export($r2->replay, true),
    ' | other policy, other terms: ', seen($r3), "\n";

echo "-- compound, mixed policies: all or nothing\n";
$limits = [
    ['limit' => 2, 'per' => 60, 'scope' => 'c-fw', 'policy' => 'fixed_window'],
    ['limit' => 3, 'per' => 60, 'scope' => 'c-sw', 'policy' => 'sliding_window'],
    ['limit' => 10, 'per' => 60, 'scope' => 'c-tb'],
];
for ($i = 0; $i < 3; $i++) {
    $d = ratelimit_acquire_all('c', $limits);
    echo seen($d), " scope=$d->scope\n";
}
echo 'sliding window untouched by the denial: ', seen(ratelimit_peek('c', 3, 60, 'c-sw', 'sliding_window')), "\n";
echo $d->headers()['RateLimit-Policy'], "\n";

echo "-- errors\n";
rl_throws(fn() => ratelimit_acquire('u', policy: 'leaky_bucket'));
rl_throws(fn() => ratelimit_acquire('u', policy: 'Fixed_Window'));
rl_throws(fn() => ratelimit_peek('u', policy: ''));
rl_throws(fn() => ratelimit_acquire_all('u', [['limit' => 1, 'per' => 1, 'scope' => 'a', 'policy' => 'x']]));
rl_throws(fn() => ratelimit_acquire_all('u', [['limit' => 1, 'per' => 1, 'scope' => 'a', 'policy' => 1]]));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('policies');
?>
--EXPECT--
-- fixed_window: 2 per 60 s from the first admission; resetAfter and Retry-After to its end
allowed ok remaining=1
allowed ok remaining=0
denied rate remaining=0
retryAfter: the window end: ok
resetAfter: the window end: ok
"fw";q=2;w=60 | "fw";r=0;t=60 | 60
peek: denied rate remaining=0
peek of a fresh window: allowed ok remaining=2 resetAfter=0
-- sliding_window: 2 per 60 s; the current window's 2 weigh whole until its end
allowed ok remaining=1
allowed ok remaining=0
denied rate remaining=0
retryAfter: just past the window end: ok
resetAfter: when the weight is 0: ok
-- another policy on an existing bucket keeps what it has available
allowed ok remaining=1
allowed ok remaining=0
denied rate remaining=0
the window starts at the change: ok
back to token_bucket: denied rate remaining=0
-- leases and request ids with a window
allowed ok remaining=9 lease=yes | denied inflight remaining=9
bool(true)
allowed ok remaining=8
allowed ok remaining=0 | replay: allowed ok remaining=0 true | other policy, other terms: denied rate remaining=0
-- compound, mixed policies: all or nothing
allowed ok remaining=1 scope=c-fw
allowed ok remaining=0 scope=c-fw
denied rate remaining=0 scope=c-fw
sliding window untouched by the denial: allowed ok remaining=1
"c-fw";q=2;w=60, "c-sw";q=3;w=60, "c-tb";q=10;w=60
-- errors
ValueError: ratelimit_acquire(): Argument #8 ($policy) must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
ValueError: ratelimit_acquire(): Argument #8 ($policy) must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
ValueError: ratelimit_peek(): Argument #5 ($policy) must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
ValueError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["policy"] must be "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"
TypeError: ratelimit_acquire_all(): Argument #2 ($limits) [0]["policy"] must be of type string, int given
