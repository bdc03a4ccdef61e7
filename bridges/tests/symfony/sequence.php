<?php
// The same timed sequence of consume() calls on Symfony's own limiter and on the bridge's, both
// made by their factories from one `framework.rate_limiter` entry, called at the same instants
// one after the other: the admissions must be the same, call for call, for every policy.
// Every call is at least 100 ms away from an instant where either limiter changes its mind (a
// window's end, a weight crossing a whole token, a token earned), so a late wake-up on a loaded
// machine moves both alike.
//   php -d extension=ratelimit.so -d ratelimit.db_path=... sequence.php
// Prints "ok - ..." or "not ok - ..." per policy (figures: both admission strings).
declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

$cases = [
    // The issue's: 12 calls over 3 s at 5 per 3 s (the bridge once admitted 9: a token bucket).
    'fixed_window, 5 per 3 s, 12 calls 0.25 s apart' => [
        ['policy' => 'fixed_window', 'limit' => 5, 'interval' => '3 seconds'],
        array_map(fn ($i) => [250 * $i + 50, 1], range(0, 11)),
    ],
    // limit 3 per 1 s; windows [0, 1000), [1200, 2200), [2400, 3400)
    'fixed_window, 3 per 1 s, costs 1 and 2' => [
        ['policy' => 'fixed_window', 'limit' => 3, 'interval' => '1 second'],
        [[0, 1], [0, 1], [0, 1], [0, 1], [400, 1], [800, 1], [1200, 1], [1350, 1], [1500, 1], [1650, 1],
            [2000, 1], [2400, 2], [2600, 2], [2800, 1], [3200, 1]],
    ],
    // limit 3 per 1 s; the window [0, 1000) full from 600 on; then the previous window's 3 weigh
    // floor(3 * (2000 - t) / 1000) in [1000, 2000) and its successor's 3 in [2000, 3000). Each
    // call within a second of an admission (Symfony's cache keeps a sliding window no longer).
    'sliding_window, 3 per 1 s' => [
        ['policy' => 'sliding_window', 'limit' => 3, 'interval' => '1 second'],
        [[0, 1], [300, 1], [600, 1], [700, 1], [900, 1], [1200, 1], [1450, 1], [1550, 1], [1850, 1],
            [2200, 1], [2500, 1], [2800, 1], [2850, 1]],
    ],
    // 3, one more each second
    'token_bucket, 3, 1 per 1 s' => [
        ['policy' => 'token_bucket', 'limit' => 3, 'rate' => ['interval' => '1 second', 'amount' => 1]],
        [[0, 1], [0, 1], [0, 1], [0, 1], [500, 1], [1200, 1], [1700, 1], [2400, 1], [2600, 1], [3700, 1], [3800, 1]],
    ],
    // 5 per day: every call after the fifth denied, and both say when (Symfony's arithmetic).
    'token_bucket, 5, 1 per day: admissions and the wait' => [
        ['policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => '1 day', 'amount' => 1]],
        array_map(fn ($i) => [100 * $i, 1], range(0, 7)),
    ],
];

$failed = 0;
foreach ($cases as $name => [$config, $steps]) {
    $config['id'] = 'seq_' . bin2hex(random_bytes(4));
    $stock = (new RateLimiterFactory($config, new InMemoryStorage()))->create('client');
    $bridge = (new ExtensionLimiterFactory($config))->create('client');
    $ours = $theirs = '';
    $waits = [];
    $t0 = hrtime(true);
    foreach ($steps as [$ms, $cost]) {
        $left = $t0 + $ms * 1000000 - hrtime(true);
        if ($left > 0) {
            time_nanosleep(intdiv($left, 1000000000), $left % 1000000000);
        }
        $b = $bridge->consume($cost);
        $s = $stock->consume($cost);
        $ours .= $b->isAccepted() ? 'A' : '-';
        $theirs .= $s->isAccepted() ? 'A' : '-';
        if (!$s->isAccepted()) {
            $waits[] = [$s->getRetryAfter()->getTimestamp() - time(), $b->getRetryAfter()->getTimestamp() - time()];
        }
    }
    $waitsSame = array_filter($waits, fn ($w) => abs($w[0] - $w[1]) > 1) === [];
    $figures = count($steps) . " calls: Symfony $theirs, bridge $ours" . (str_contains($name, 'wait') && $waits !== []
        ? sprintf('; retry after: Symfony %d s, bridge %d s', $waits[0][0], $waits[0][1]) : '');
    if ($ours === $theirs && (!str_contains($name, 'wait') || $waitsSame)) {
        echo "ok - the same admissions as Symfony's own limiter, $name: $figures\n";
    } else {
        $failed++;
        echo "not ok - the same admissions as Symfony's own limiter, $name: $figures\n";
    }
}
exit($failed === 0 ? 0 : 1);
