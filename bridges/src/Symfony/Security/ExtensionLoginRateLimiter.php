<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony\Security;

use RateLimit\Bridge\Symfony\LimiterFactoryInterface;
use Symfony\Component\HttpFoundation\RateLimiter\AbstractRequestRateLimiter;
use Symfony\Component\HttpFoundation\Request;

/**
 * Symfony's DefaultLoginRateLimiter (`login_throttling`) on the bridge's factories: a limit per
 * client address (`max_attempts` x 5) and one per user name and address (`max_attempts`), as
 * Symfony's, whose constructor takes only its final RateLimiterFactory. RateLimitBundle puts it
 * in its place. The user name reaches the extension only as part of a subject (stored as an HMAC
 * pseudonym); with Symfony's `%kernel.secret%` given, hashed with it first, as Symfony 6.x does.
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
        $ip = $request->getClientIp();
        if ($this->secret !== null && $this->secret !== '') {
            $username = hash_hmac('sha256', $username, $this->secret);
        }

        return [
            $this->globalFactory->create($ip),
            $this->localFactory->create($username . '-' . $ip),
        ];
    }
}
