--TEST--
ratelimit_reserve(): a token bucket books each token at the exact instant it is earned, one after the other; past $max_wait a denial that takes nothing; INF books whatever the wait
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// 5 per 100 s: a token every 20 s, earned from the first call on. The booked instant of a
// call lies between its start and its end plus its waitFor; booking k is exactly 20k s after
// the first call.
$booked = [];
$calls = [];
for ($i = 0; $i < 9; $i++) {
    $before = microtime(true);
    $d = ratelimit_reserve('s', 60.0, 5, 100);
    $after = microtime(true);
    $calls[] = sprintf('%s %s reserved=%d', $d->allowed ? 'allowed' : 'denied', $d->reason, $d->reserved);
    if ($d->allowed) {
        $booked[] = [$before + $d->waitFor, $after + $d->waitFor, $d->waitFor];
    } else {
        $denied = [$before, $after, $d];
    }
}
echo implode("\n", $calls), "\n";
$zero = array_map(fn($b) => $b[2], array_slice($booked, 0, 5));
rl_check('the first 5 wait nothing', $zero === [0.0, 0.0, 0.0, 0.0, 0.0], $zero);
for ($k = 5; $k < count($booked); $k++) {
    [$lo0, $hi0] = $booked[0];
    [$lo, $hi, $w] = $booked[$k];
    $gap = 20.0 * ($k - 4);
    rl_check("booking " . ($k - 4) . " is {$gap} s after the first call",
        $lo - 0.002 <= $hi0 + $gap && $lo0 + $gap <= $hi + 0.002 && $w <= 60.0, [$lo, $hi, $lo0, $hi0, $w]);
}

// The denial: retryAfter as ratelimit_acquire() says (when 1 token is earned after the
// bookings: 80 s after the start), and it took nothing: INF books that very instant.
[$before, $after, $d] = $denied;
rl_check('denied retryAfter is the next free instant', abs($before + $d->retryAfter - ($booked[0][0] + 80.0)) < 1.0, $d->retryAfter);
echo "denial waitFor: ", $d->waitFor, "\n";
$d = ratelimit_reserve('s', INF, 5, 100);
rl_check('INF books the instant the denial named', abs(microtime(true) + $d->waitFor - ($booked[0][0] + 80.0)) < 1.0, $d->waitFor);
echo "INF: $d->reason reserved=$d->reserved remaining=$d->remaining\n";
echo "headers of a booking: ", implode(',', array_keys($d->headers())), "\n";

// A plain call queues behind the bookings: denied, retryAfter past them.
$a = ratelimit_acquire('s', 5, 100);
echo "acquire: $a->reason waitFor=$a->waitFor reserved=$a->reserved\n";
rl_check('acquire waits past every booking', $a->retryAfter > 99.0 && $a->retryAfter <= 100.0, $a->retryAfter);
$p = ratelimit_peek('s', 5, 100);
echo "peek: remaining=$p->remaining reserved=$p->reserved\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('reserve_successive_slots');
?>
--EXPECT--
allowed ok reserved=0
allowed ok reserved=0
allowed ok reserved=0
allowed ok reserved=0
allowed ok reserved=0
allowed ok reserved=1
allowed ok reserved=2
allowed ok reserved=3
denied rate reserved=3
the first 5 wait nothing: ok
booking 1 is 20 s after the first call: ok
booking 2 is 40 s after the first call: ok
booking 3 is 60 s after the first call: ok
denied retryAfter is the next free instant: ok
denial waitFor: 0
INF books the instant the denial named: ok
INF: ok reserved=4 remaining=0
headers of a booking: RateLimit-Policy,RateLimit
acquire: rate waitFor=0 reserved=4
acquire waits past every booking: ok
peek: remaining=0 reserved=4
