<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Closure;
use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use RateLimit\Bridge\Key;
use RateLimit\Decision;

/**
 * Laravel's RateLimiter with its decisions taken by the extension instead of a cache: one
 * token bucket per key, shared by every PHP process of the host, in one atomic step per
 * decision. Bound in the container by RateLimitServiceProvider, so the `throttle:` middleware,
 * the `RateLimiter` facade and queue job middleware use it unchanged.
 *
 * Laravel's words onto the bucket (a key's bucket holds `maxAttempts` tokens and refills
 * `maxAttempts` tokens every `decaySeconds`, continuously):
 * - attempt(): one atomic take; the callback runs only when a token was taken.
 * - tooManyAttempts(): a read (nothing is charged): true when the bucket holds no whole token.
 * - hit(): takes one token; returns the tokens in use (`maxAttempts` - tokens left), or
 *   `maxAttempts + 1` when the bucket was empty (nothing was taken).
 *   When the same key's last tooManyAttempts() in this process answered false (the caller was
 *   told to go ahead, as the throttle middleware and the queue's RateLimited middleware are)
 *   and another worker took the last token in between, hit() throws TooManyAttemptsException
 *   (an HTTP 429 ThrottleRequestsException where illuminate/http is installed), so that
 *   "check, then hit" admits exactly `maxAttempts` however many workers race.
 * - attempts(): tokens in use; it falls as the bucket refills, rather than at a window's end.
 * - remaining() / retriesLeft(): whole tokens left.
 * - availableIn(): seconds until the next token, rounded up (0 when one is there).
 * - clear() / resetAttempts(): forget the bucket (full again).
 * A bucket's size and refill are remembered per key by this object from the calls that give
 * them (tooManyAttempts/remaining give maxAttempts, hit gives decaySeconds, attempt() and named
 * limiters give both); until then the defaults of the constructor apply. Under php-fpm a Laravel
 * application, and so this object, lives for one request.
 */
class ExtensionRateLimiter extends RateLimiter
{
    /** @var array<string, array{int, int}> key => [maxAttempts, decaySeconds] last seen */
    private array $policies = [];

    /** @var array<string, true> keys whose last tooManyAttempts() answered false, not hit since */
    private array $cleared = [];

    /**
     * @param string $scope               the extension's scope of every key of this limiter
     * @param int    $defaultMaxAttempts  bucket size of a key before a call gave one
     * @param int    $defaultDecaySeconds refill time of a key before a call gave one
     * @param int    $inflight            most live leases per key taken by hit() and attempt()
     *                                    (0: none); a hit's lease ends with the request
     *                                    (under Octane: with the HTTP request, see
     *                                    RateLimitServiceProvider::boot(); in another
     *                                    long-running CLI process: at ratelimit.lease_ttl, or
     *                                    ratelimit_end_request()), attempt()'s when its
     *                                    callback returns
     */
    public function __construct(
        private readonly string $scope = 'laravel',
        private readonly int $defaultMaxAttempts = 60,
        private readonly int $defaultDecaySeconds = 60,
        private readonly int $inflight = 0,
    ) {
        // No cache: parent::__construct() is not called and $this->cache stays unset.
    }

    /**
     * A named limiter; its Limit objects also tell this limiter the keys' sizes and refill
     * times before the middleware asks tooManyAttempts().
     *
     * @return Closure|null
     */
    public function limiter(string $name)
    {
        $callback = parent::limiter($name);
        if (!$callback instanceof Closure) {
            return $callback;
        }
        return function (...$args) use ($callback, $name) {
            $result = $callback(...$args);
            foreach (\is_array($result) ? $result : [$result] as $limit) {
                if ($limit instanceof Limit) {
                    // ThrottleRequests' key for a named limit (illuminate/routing 8.x).
                    $key = md5($name . $limit->key);
                    $this->remember($key, (int) $limit->maxAttempts, (int) $limit->decayMinutes * 60);
                }
            }
            return $result;
        };
    }

    /**
     * Runs `$callback` if a token could be taken, in one atomic step; false otherwise.
     *
     * @param string $key
     * @param int    $maxAttempts
     * @param int    $decaySeconds
     * @return mixed the callback's result, or true when it returned a falsy value; false if limited
     */
    public function attempt($key, $maxAttempts, Closure $callback, $decaySeconds = 60)
    {
        $k = $this->remember($key, (int) $maxAttempts, (int) $decaySeconds);
        unset($this->cleared[$k]);
        $decision = $this->take($k);
        if (!$decision->allowed) {
            return false;
        }
        try {
            return $callback() ?: true;
        } finally {
            if ($decision->lease !== null) {
                ratelimit_release($decision);
            }
        }
    }

    /**
     * @param string $key
     * @param int    $maxAttempts
     * @return bool true when the key's bucket holds no whole token (nothing is charged)
     */
    public function tooManyAttempts($key, $maxAttempts)
    {
        $k = $this->remember($key, (int) $maxAttempts, null);
        if (!$this->peek($k)->allowed) {
            unset($this->cleared[$k]);
            return true;
        }
        $this->cleared[$k] = true;
        return false;
    }

    /**
     * @param string $key
     * @param int    $decaySeconds
     * @return int the tokens in use after this hit, or maxAttempts + 1 when none was left
     *
     * @throws \Illuminate\Http\Exceptions\ThrottleRequestsException no token was left although
     *         this key's last tooManyAttempts() in this process answered false (its previous
     *         exception is a TooManyAttemptsException); TooManyAttemptsException itself when
     *         illuminate/http is not installed
     */
    public function hit($key, $decaySeconds = 60)
    {
        $k = $this->remember($key, null, (int) $decaySeconds);
        $told = isset($this->cleared[$k]);
        unset($this->cleared[$k]);
        $decision = $this->take($k);
        if ($decision->allowed) {
            return $decision->limit - $decision->remaining;
        }
        if ($told) {
            throw TooManyAttemptsException::throwable($decision);
        }
        return $decision->limit + 1;
    }

    /**
     * @param string $key
     * @return int tokens in use: maxAttempts - whole tokens left
     */
    public function attempts($key)
    {
        $decision = $this->peek($this->clean($key));
        return $decision->limit - $decision->remaining;
    }

    /**
     * @param string $key
     * @return bool true when there was a bucket to forget
     */
    public function resetAttempts($key)
    {
        $k = $this->clean($key);
        unset($this->cleared[$k]);
        return ratelimit_reset(Key::subject($k), $this->scope);
    }

    /**
     * @param string $key
     * @param int    $maxAttempts
     * @return int whole tokens left
     */
    public function remaining($key, $maxAttempts)
    {
        return $this->peek($this->remember($key, (int) $maxAttempts, null))->remaining;
    }

    /**
     * @param string $key
     * @return void
     */
    public function clear($key)
    {
        $this->resetAttempts($key);
    }

    /**
     * @param string $key
     * @return int seconds until the next token, rounded up; 0 when one is there
     */
    public function availableIn($key)
    {
        return (int) ceil($this->peek($this->clean($key))->retryAfter);
    }

    /**
     * The extension's own answer for `$key` now, without taking anything: headers(), reason.
     */
    public function decision(string $key): Decision
    {
        return $this->peek($this->clean($key));
    }

    private function clean(string $key): string
    {
        return $this->cleanRateLimiterKey($key);
    }

    /** Records what a call says of a key's bucket; returns the cleaned key. */
    private function remember(string $key, ?int $maxAttempts, ?int $decaySeconds): string
    {
        $k = $this->clean($key);
        [$max, $decay] = $this->policies[$k] ?? [$this->defaultMaxAttempts, $this->defaultDecaySeconds];
        $this->policies[$k] = [$maxAttempts ?? $max, $decaySeconds ?? $decay];
        return $k;
    }

    /** @return array{int, int} */
    private function policy(string $k): array
    {
        [$max, $decay] = $this->policies[$k] ?? [$this->defaultMaxAttempts, $this->defaultDecaySeconds];
        if ($max < 1 || $decay < 1) {
            throw new \InvalidArgumentException(sprintf(
                'A rate limit needs maxAttempts >= 1 and decaySeconds >= 1 (got %d and %d).',
                $max,
                $decay,
            ));
        }
        return [$max, $decay];
    }

    private function take(string $k): Decision
    {
        [$max, $decay] = $this->policy($k);
        return ratelimit_acquire(
            Key::subject($k),
            limit: $max,
            per: (float) $decay,
            inflight: $this->inflight,
            scope: $this->scope,
        );
    }

    private function peek(string $k): Decision
    {
        [$max, $decay] = $this->policy($k);
        return ratelimit_peek(Key::subject($k), limit: $max, per: (float) $decay, scope: $this->scope);
    }
}
