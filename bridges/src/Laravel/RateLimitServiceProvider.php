<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Illuminate\Cache\RateLimiter;
use Illuminate\Support\ServiceProvider;

/**
 * Binds ExtensionRateLimiter as Illuminate\Cache\RateLimiter, which the `throttle:` middleware,
 * the RateLimiter facade and the queue's RateLimited middleware resolve.
 *
 * Options from config('ratelimit') when a config repository is bound: `scope` ('laravel'),
 * `max_attempts` (60) and `decay_seconds` (60), the defaults of a key no call has described
 * yet, and `inflight` (0).
 */
class RateLimitServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->app->singleton(RateLimiter::class, fn ($app) => self::limiter($app));
        // Laravel's CacheServiceProvider is deferred: when it loads (at the first use of the
        // cache) it binds the stock RateLimiter again over the binding above. An extender
        // outlives a rebinding, so the stock one is replaced whenever it is built.
        $this->app->extend(
            RateLimiter::class,
            fn ($limiter, $app) => $limiter instanceof ExtensionRateLimiter ? $limiter : self::limiter($app),
        );
    }

    /** @param \Illuminate\Contracts\Container\Container $app */
    private static function limiter($app): ExtensionRateLimiter
    {
        $config = [];
        if ($app->bound('config')) {
            $config = (array) $app->make('config')->get('ratelimit', []);
        }
        return new ExtensionRateLimiter(
            scope: (string) ($config['scope'] ?? 'laravel'),
            defaultMaxAttempts: (int) ($config['max_attempts'] ?? 60),
            defaultDecaySeconds: (int) ($config['decay_seconds'] ?? 60),
            inflight: (int) ($config['inflight'] ?? 0),
        );
    }
}
