<?php
// Peer 2: Symfony RateLimiter (Debian php-symfony-rate-limiter 5.4) token bucket, state in a
// FilesystemAdapter cache, each decision under a FlockStore lock: correct across processes.
// Symfony refills in whole-second steps: `per/limit` seconds per token when that is a whole
// number, else `limit` tokens every `per` seconds (never more generous than the continuous bucket).
declare(strict_types=1);
require_once '/usr/share/php/Symfony/Component/RateLimiter/autoload.php';
require_once '/usr/share/php/Symfony/Component/Cache/autoload.php';

use Symfony\Component\Cache\Adapter\FilesystemAdapter;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\FlockStore;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\CacheStorage;

return static function (array $o): object {
    $step = $o['per'] / $o['limit'];
    if ($step >= 1 && $step == floor($step)) {
        $refill = [1, (int) $step];
    } elseif ($o['per'] >= 1 && $o['per'] == floor($o['per'])) {
        $refill = [$o['limit'], (int) $o['per']];
    } else {
        throw new InvalidArgumentException('symfony peer: per must be a whole number of seconds');
    }
    $rate = ['interval' => $refill[1] . ' seconds', 'amount' => $refill[0]];
    $factory = new RateLimiterFactory(
        ['id' => 'bench', 'policy' => 'token_bucket', 'limit' => $o['limit'], 'rate' => $rate],
        new CacheStorage(new FilesystemAdapter('ratelimit', 0, $o['dir'] . '/cache')),
        new LockFactory(new FlockStore($o['dir'] . '/locks')),
    );
    return new class ($factory, $refill) {
        /** @param array{int, int} $refillStep tokens added per step of seconds (for bench/lib/contend.php) */
        public function __construct(private RateLimiterFactory $factory, public array $refillStep)
        {
        }

        public function acquire(string $subject): bool
        {
            return $this->factory->create($subject)->consume(1)->isAccepted();
        }
    };
};
