<?php
// One Symfony rate decision per request, by the stock token_bucket or by the bridge; the same
// code for both but for the factory:
//   ?impl=bridge|stock&s=KEY&limit=5 (&policy=token_bucket|token_bucket1|fixed_window|sliding_window;
//   &cache=shared|master: the stock limiter's cache and lock
//   dirs, one for the host or one per php-fpm master; &ms=N sleeps N ms after deciding)
// 200 when accepted, 429 when not; X-Worker-Pid names the worker.
declare(strict_types=1);

require dirname(__DIR__) . '/bootstrap.php';

use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use Symfony\Component\Cache\Adapter\FilesystemAdapter;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\FlockStore;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\CacheStorage;

header('X-Worker-Pid: ' . getmypid());
$limit = (int) ($_GET['limit'] ?? 5);
// framework.rate_limiter.fpm_test: token_bucket, `limit` tokens, `limit` more per day; or a
// window of `limit` per day.
$policy = $_GET['policy'] ?? 'token_bucket';
$config = match ($policy) {
    'token_bucket' => ['id' => 'fpm_test', 'policy' => 'token_bucket', 'limit' => $limit, 'rate' => ['interval' => '1 day', 'amount' => $limit]],
    // `limit` tokens, one more per day
    'token_bucket1' => ['id' => 'fpm_tb1', 'policy' => 'token_bucket', 'limit' => $limit, 'rate' => ['interval' => '1 day', 'amount' => 1]],
    default => ['id' => 'fpm_' . $policy, 'policy' => $policy, 'limit' => $limit, 'interval' => '1 day'],
};

if (($_GET['impl'] ?? '') === 'bridge') {
    $factory = new ExtensionLimiterFactory($config);
} else {
    $dir = getenv('RL_TMP') . '/sf-stock-' . (($_GET['cache'] ?? 'shared') === 'master' ? getenv('RL_MASTER') : 'shared');
    $factory = new RateLimiterFactory(
        $config,
        new CacheStorage(new FilesystemAdapter('ratelimit', 0, $dir . '/cache')),
        new LockFactory(new FlockStore($dir . '/locks')),
    );
}
$limiter = $factory->create($_GET['s'] ?? 'demo');
if (($_GET['op'] ?? '') === 'reserve') {
    // &op=reserve&max=S: reserve(1, S); 200 with the booked wait (whole seconds) as the reason, or 429.
    try {
        $wait = $limiter->reserve(1, (float) ($_GET['max'] ?? 0))->getWaitDuration();
        header('X-RateLimit-Reason: wait-' . (int) round($wait));
        http_response_code(200);
    } catch (MaxWaitDurationExceededException) {
        header('X-RateLimit-Reason: too-long');
        http_response_code(429);
    }
    exit;
}
$limit = $limiter->consume();

header('X-RateLimit-Reason: ' . ($limit->isAccepted() ? 'ok' : 'rate'));
header('X-RateLimit-Remaining: ' . $limit->getRemainingTokens());
if (isset($_GET['ms'])) {
    usleep(1000 * (int) $_GET['ms']);
}
http_response_code($limit->isAccepted() ? 200 : 429);
echo $limit->isAccepted() ? "ok\n" : "Too Many Requests\n";
