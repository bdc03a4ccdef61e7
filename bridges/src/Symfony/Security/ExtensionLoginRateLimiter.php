<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony\Security;

use RateLimit\Bridge\Symfony\LimiterFactoryInterface;
use Symfony\Component\HttpFoundation\RateLimiter\AbstractRequestRateLimiter;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\Security\Http\RateLimiter\DefaultLoginRateLimiter;

/**
 * Symfony's DefaultLoginRateLimiter (`login_throttling`) on the bridge's factories: a limit per
 * client address (`max_attempts` x 5) and one per user name and address (`max_attempts`), keyed
 * as the installed Symfony keys them (6.4 on: an HMAC of each with `%kernel.secret%`; 5.4: in
 * clear, the extension storing only its own HMAC pseudonyms either way). Symfony's constructor
 * takes only its final RateLimiterFactory; RateLimitBundle puts this class in its place.
 */
final class ExtensionLoginRateLimiter extends AbstractRequestRateLimiter
{
    public function __construct(
        private readonly LimiterFactoryInterface $globalFactory,
        private readonly LimiterFactoryInterface $localFactory,
        #[\SensitiveParameter] private readonly ?string $secret = null,
    ) {
    }

    protected function getLimiters(Request $request): array
    {
        // Security::LAST_USERNAME ('_security.last_username'), moved to SecurityRequestAttributes in 6.2.
        $username = $request->attributes->get('_security.last_username', '');
        $username = \is_string($username) ? $username : '';
        $username = preg_match('//u', $username) === 1 ? mb_strtolower($username, 'UTF-8') : strtolower($username);
        $ip = (string) $request->getClientIp();

        return [
            $this->globalFactory->create($this->key($ip)),
            $this->localFactory->create($this->key($username . '-' . $ip)),
        ];
    }

    /** The key Symfony's DefaultLoginRateLimiter of the installed version derives. */
    private function key(string $data): string
    {
        if ($this->secret === null || $this->secret === '' || !self::symfonyHashes()) {
            return $data;
        }
        return strtr(substr(base64_encode(hash_hmac('sha256', $data, $this->secret, true)), 0, 8), '/+', '._');
    }

    /** Symfony 6.x and later hash the keys (their DefaultLoginRateLimiter takes the secret). */
    private static function symfonyHashes(): bool
    {
        static $hashes = null;
        return $hashes ??= class_exists(DefaultLoginRateLimiter::class)
            && (new \ReflectionMethod(DefaultLoginRateLimiter::class, '__construct'))->getNumberOfParameters() >= 3;
    }
}
