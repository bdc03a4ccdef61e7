<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use Symfony\Component\RateLimiter\LimiterInterface;

/**
 * What code needs of a limiter factory: Symfony 5.4's RateLimiterFactory is a final class with
 * no interface, so a type hint on it cannot take another factory. Type-hint this instead (or
 * ExtensionLimiterFactory).
 */
interface LimiterFactoryInterface
{
    public function create(?string $key = null): LimiterInterface;
}
