<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Illuminate\Cache\RateLimiter;
use Illuminate\Support\ServiceProvider;

/**
 * Binds ExtensionRateLimiter as Illuminate\Cache\RateLimiter, which the `throttle:` middleware,
 * the RateLimiter facade and the queue's RateLimited middleware resolve.
 *
 * Options from config('ratelimit') when a config repository is bound: `scope` ('laravel') and
 * `inflight` (0).
 *
 * Under Laravel Octane, whose workers serve many HTTP requests inside one PHP request, it also
 * ends each HTTP request's leases on Octane's RequestTerminated event (see boot()).
 */
class RateLimitServiceProvider extends ServiceProvider
{
    /** Octane's event after each HTTP request (with its terminating callbacks) is done. */
    public const OCTANE_REQUEST_TERMINATED = 'Laravel\\Octane\\Events\\RequestTerminated';

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

    /**
     * Under Octane (Swoole, RoadRunner, FrankenPHP) a lease an HTTP request took and did not
     * release (a hit() with `inflight`, a script's own ratelimit_acquire()) would otherwise live
     * until the worker ends or ratelimit.lease_ttl: ratelimit_end_request() ends it with the
     * HTTP request, as the end of the PHP request does under php-fpm. Octane runs one request at
     * a time per worker, so the worker's leases are that request's. Without Octane (the class
     * does not exist) nothing is listened to: no dependency on it.
     */
    public function boot(): void
    {
        if (!class_exists(self::OCTANE_REQUEST_TERMINATED) || !$this->app->bound('events')) {
            return;
        }
        $this->app->make('events')->listen(self::OCTANE_REQUEST_TERMINATED, static function (): void {
            ratelimit_end_request();
        });
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
            inflight: (int) ($config['inflight'] ?? 0),
        );
    }
}
