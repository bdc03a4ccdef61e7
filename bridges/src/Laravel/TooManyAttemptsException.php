<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Illuminate\Http\Exceptions\ThrottleRequestsException;
use RateLimit\Decision;

if (class_exists(ThrottleRequestsException::class)) {
    /**
     * Thrown by ExtensionRateLimiter::hit() when the caller was told to go ahead by
     * tooManyAttempts() and another worker took the last token in between. Where illuminate/http
     * is installed (any Laravel application) it is the middleware's own ThrottleRequestsException:
     * Laravel answers 429 with the same headers as a denial by the throttle middleware.
     */
    class TooManyAttemptsException extends ThrottleRequestsException
    {
        public static function from(Decision $decision): self
        {
            return new self('Too Many Attempts.', null, Headers::of($decision));
        }
    }
} else {
    /**
     * Thrown by ExtensionRateLimiter::hit() when the caller was told to go ahead by
     * tooManyAttempts() and another worker took the last token in between.
     */
    class TooManyAttemptsException extends \RuntimeException
    {
        /** @var array<string, int> */
        private array $headers = [];

        public static function from(Decision $decision): self
        {
            $e = new self('Too Many Attempts.');
            $e->headers = Headers::of($decision);
            return $e;
        }

        /** @return array<string, int> */
        public function getHeaders(): array
        {
            return $this->headers;
        }
    }
}
