--TEST--
Policies: fixed_window, sliding_window and token_bucket admit what Symfony's own limiters admit, call for call, on a timed sequence
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// Symfony's rate limiter as Debian packages it (php-symfony-rate-limiter: 5.4 on Debian 12,
// 6.4 on Debian 13), required: scripts/install-deps installs it.
$dir = '/usr/share/php/Symfony/Component/RateLimiter';
if (!is_file("$dir/autoload.php")) {
    echo "no Symfony rate limiter in $dir (php-symfony-rate-limiter)\n";
    exit(1);
}
require "$dir/autoload.php";
use Symfony\Component\RateLimiter\Policy\FixedWindowLimiter;
use Symfony\Component\RateLimiter\Policy\Rate;
use Symfony\Component\RateLimiter\Policy\SlidingWindowLimiter;
use Symfony\Component\RateLimiter\Policy\TokenBucketLimiter;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

// Each step: [ms after the first call, cost]. Every call is at least 100 ms from any instant
// where either limiter changes its mind (a window's end, a weight crossing a whole token, a
// token earned), so a late wake-up on a loaded machine moves both limiters alike: they are
// called at the same instant, one after the other.
$sequences = [
    'fixed_window' => [
        // limit 3 per 1 s; windows [0, 1000), [1200, 2200), [2400, 3400)
        [0, 1], [0, 1], [0, 1], [0, 1], [400, 1], [800, 1],
        [1200, 1], [1350, 1], [1500, 1], [1650, 1], [2000, 1],
        [2400, 2], [2600, 2], [2800, 1], [3200, 1],
    ],
    'sliding_window' => [
        // limit 3 per 1 s; window [0, 1000) full from 600 on; then the previous window's 3
        // weigh floor(3 * (2000 - t) / 1000) in [1000, 2000) (thresholds at 1333 and 1667)
        // and its successor's 3 as much in [2000, 3000). Symfony's storage keeps a sliding
        // window for whole seconds only (its TTL, floor(end + per - now), is truncated): a
        // call more than a second after the last admission would find it forgotten, and
        // admit more than the weighted count (ours keeps it); each call here comes within a
        // second of an admission.
        [0, 1], [300, 1], [600, 1], [700, 1], [900, 1],
        [1200, 1], [1450, 1], [1550, 1], [1850, 1],
        [2200, 1], [2500, 1], [2800, 1], [2850, 1],
    ],
    'token_bucket' => [
        // 3, one more each second (Symfony: Rate PT1S 1; here 3 per 3 s)
        [0, 1], [0, 1], [0, 1], [0, 1], [500, 1], [1200, 1], [1700, 1],
        [2400, 1], [2600, 1], [3700, 1], [3800, 1],
    ],
];

function symfony(string $policy, InMemoryStorage $storage)
{
    $second = new \DateInterval('PT1S');
    return match ($policy) {
        'fixed_window' => new FixedWindowLimiter('s', 3, $second, $storage),
        'sliding_window' => new SlidingWindowLimiter('s', 3, $second, $storage),
        'token_bucket' => new TokenBucketLimiter('s', 3, new Rate($second, 1), $storage),
    };
}

function wait_until(int $t0, int $ms): void
{
    $left = $t0 + $ms * 1000000 - hrtime(true);
    if ($left > 0) {
        time_nanosleep(intdiv($left, 1000000000), $left % 1000000000);
    }
}

foreach ($sequences as $policy => $steps) {
    $stock = symfony($policy, new InMemoryStorage());
    $ours = $theirs = '';
    $t0 = hrtime(true);
    foreach ($steps as [$ms, $cost]) {
        wait_until($t0, $ms);
        $ours .= ratelimit_acquire('client', 3, $policy === 'token_bucket' ? 3.0 : 1.0,
            scope: $policy, cost: $cost, policy: $policy)->allowed ? 'A' : '-';
        $theirs .= $stock->consume($cost)->isAccepted() ? 'A' : '-';
    }
    $n = count($steps);
    echo "$policy: $n calls, ", $ours === $theirs ? 'the same admissions as Symfony' : "ours $ours, Symfony's $theirs", "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('policies_as_symfony');
?>
--EXPECT--
fixed_window: 15 calls, the same admissions as Symfony
sliding_window: 13 calls, the same admissions as Symfony
token_bucket: 11 calls, the same admissions as Symfony
