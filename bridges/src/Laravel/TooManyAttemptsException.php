<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Illuminate\Http\Exceptions\ThrottleRequestsException;
use RateLimit\Decision;

/**
 * ExtensionRateLimiter::hit() found no token although the caller was told to go ahead by
 * tooManyAttempts(): another worker took the last token in between.
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
     * The exception hit() throws for `$decision` (a denial).
     */
    public static function throwable(Decision $decision): \Throwable
    {
        $e = new self(Headers::of($decision));
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
