<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Illuminate\Http\Exceptions\ThrottleRequestsException;

/**
 * ExtensionRateLimiter::hit() counted an attempt past the limit although the caller was told to
 * go ahead by tooManyAttempts(): another worker took the last attempt in between (or the
 * bridge's `inflight` limit refused the hit).
 *
 * Where illuminate/http is installed (any Laravel application) hit() throws the throttle
 * middleware's own ThrottleRequestsException, with this exception as its previous one, so that
 * Laravel answers 429 with the same headers as any other denial by the middleware; elsewhere it
 * throws this exception.
 */
final class TooManyAttemptsException extends \RuntimeException
{
    /** @param array<string, int> $headers */
    private function __construct(private readonly array $headers)
    {
        parent::__construct('Too Many Attempts.');
    }

    /**
     * The exception hit() throws: the limit told (null: none) and the whole seconds to wait.
     */
    public static function throwable(?int $limit, int $retryAfter): \Throwable
    {
        $e = new self(Headers::denial($limit, $retryAfter));
        if (class_exists(ThrottleRequestsException::class)) {
            return new ThrottleRequestsException('Too Many Attempts.', $e, $e->headers);
        }
        return $e;
    }

    /**
     * The headers the throttle middleware sends with a denial: X-RateLimit-Limit,
     * X-RateLimit-Remaining (0), Retry-After, X-RateLimit-Reset.
     *
     * @return array<string, int>
     */
    public function getHeaders(): array
    {
        return $this->headers;
    }
}
