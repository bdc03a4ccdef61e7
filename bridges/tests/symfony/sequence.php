<?php
// The same timed sequence of consume() calls on Symfony's own limiter and on the bridge's, both
// made by their factories from one `framework.rate_limiter` entry, called at the same instants
// one after the other: the admissions must be the same, call for call, for every policy.
// Every call is at least 200 ms away from an instant where either limiter changes its mind (a
// window's end, a weight crossing a whole token, a token earned), and a run with a call later
// than that is run again, so a late wake-up on a loaded machine cannot tell them apart.
//   php -d extension=ratelimit.so -d ratelimit.db_path=... sequence.php
// Prints "ok - ..." or "not ok - ..." per policy (figures: both admission strings).
declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

// Every instant is at least 200 ms away from one where either limiter changes its mind.
$cases = [
    // The issue's: 12 calls over 3 s at 5 per 3 s (the bridge once admitted 9: a token bucket).
    'fixed_window, 5 per 3 s, 12 calls 0.25 s apart' => [
        ['policy' => 'fixed_window', 'limit' => 5, 'interval' => '3 seconds'],
        array_map(fn ($i) => [250 * $i + 50, 1], range(0, 11)),
    ],
    // limit 3 per 2 s; windows [0, 2000), [2400, 4400), [4800, 6800)
    'fixed_window, 3 per 2 s, costs 1 and 2' => [
        ['policy' => 'fixed_window', 'limit' => 3, 'interval' => '2 seconds'],
        [[0, 1], [0, 1], [0, 1], [0, 1], [800, 1], [1600, 1], [2400, 1], [2700, 1], [3000, 1], [3300, 1],
            [4000, 1], [4800, 2], [5200, 2], [5600, 1], [6400, 1]],
    ],
    // limit 3 per 2 s; the window [0, 2000) full from 1200 on; then the previous window's 3
    // weigh floor(3 * (4000 - t) / 2000) in [2000, 4000) and its successor's 3 in [4000, 6000).
    // Each call within 2 s of an admission (Symfony's cache keeps a sliding window no longer).
    'sliding_window, 3 per 2 s' => [
        ['policy' => 'sliding_window', 'limit' => 3, 'interval' => '2 seconds'],
        [[0, 1], [600, 1], [1200, 1], [1400, 1], [1800, 1], [2400, 1], [2900, 1], [3100, 1], [3700, 1],
            [4400, 1], [5000, 1], [5600, 1], [5700, 1]],
    ],
    // 3, one more every 2 s
    'token_bucket, 3, 1 per 2 s' => [
        ['policy' => 'token_bucket', 'limit' => 3, 'rate' => ['interval' => '2 seconds', 'amount' => 1]],
        [[0, 1], [0, 1], [0, 1], [0, 1], [1000, 1], [2400, 1], [3400, 1], [4800, 1], [5200, 1], [7400, 1], [7600, 1]],
    ],
    // 5 per day: every call after the fifth denied, and both say when (Symfony's arithmetic).
    'token_bucket, 5, 1 per day: admissions and the wait' => [
        ['policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => '1 day', 'amount' => 1]],
        array_map(fn ($i) => [100 * $i, 1], range(0, 7)),
    ],
];

/**
 * One run of a case: both admission strings, Symfony's and the bridge's first waits, and
 * whether every pair of calls ended within 190 ms of its instant (else the run says nothing:
 * the margins are 200 ms).
 *
 * @return array{string, string, list<array{int, int}>, bool}
 */
function run_case(array $config, array $steps): array
{
    $config['id'] = 'seq_' . bin2hex(random_bytes(4));
    $stock = (new RateLimiterFactory($config, new InMemoryStorage()))->create('client');
    $bridge = (new ExtensionLimiterFactory($config))->create('client');
    $ours = $theirs = '';
    $waits = [];
    $onTime = true;
    $t0 = hrtime(true);
    foreach ($steps as [$ms, $cost]) {
        $at = $t0 + $ms * 1000000;
        $left = $at - hrtime(true);
        if ($left > 0) {
            time_nanosleep(intdiv($left, 1000000000), $left % 1000000000);
        }
        $b = $bridge->consume($cost);
        $s = $stock->consume($cost);
        $onTime = $onTime && hrtime(true) - $at < 190000000;
        $ours .= $b->isAccepted() ? 'A' : '-';
        $theirs .= $s->isAccepted() ? 'A' : '-';
        if (!$s->isAccepted()) {
            $waits[] = [$s->getRetryAfter()->getTimestamp() - time(), $b->getRetryAfter()->getTimestamp() - time()];
        }
    }
    return [$theirs, $ours, $waits, $onTime];
}

$failed = 0;
foreach ($cases as $name => [$config, $steps]) {
    // A run whose calls came late (a loaded machine) is run again, at most 5 times in all.
    $late = 0;
    do {
        [$theirs, $ours, $waits, $onTime] = run_case($config, $steps);
    } while (!$onTime && ++$late < 5);
    $waitsSame = array_filter($waits, fn ($w) => abs($w[0] - $w[1]) > 1) === [];
    $figures = count($steps) . " calls: Symfony $theirs, bridge $ours" . (str_contains($name, 'wait') && $waits !== []
        ? sprintf('; retry after: Symfony %d s, bridge %d s', $waits[0][0], $waits[0][1]) : '')
        . ($late > 0 ? "; $late run(s) with a call more than 190 ms late run again" : '');
    if ($onTime && $ours === $theirs && (!str_contains($name, 'wait') || $waitsSame)) {
        echo "ok - the same admissions as Symfony's own limiter, $name: $figures\n";
    } else {
        $failed++;
        echo "not ok - the same admissions as Symfony's own limiter, $name: $figures" . ($onTime ? '' : ' (every run late)') . "\n";
    }
}
exit($failed === 0 ? 0 : 1);
