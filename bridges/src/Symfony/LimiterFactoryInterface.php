<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimiterFactoryInterface;

// What code needs of a limiter factory. Symfony 5.4 to 7.2's RateLimiterFactory is a final class
// with no interface, so a type hint on it cannot take another factory: type-hint this instead.
// From Symfony 7.3 on, this is also Symfony's RateLimiterFactoryInterface, so code type-hinted
// with that one takes the bridge's factory unchanged (the bundle aliases it).
if (interface_exists(RateLimiterFactoryInterface::class)) {
    interface LimiterFactoryInterface extends RateLimiterFactoryInterface
    {
    }
} else {
    // phpcs:ignore PSR1.Classes.ClassDeclaration.MultipleClasses -- one of the two is declared
    interface LimiterFactoryInterface
    {
        public function create(?string $key = null): LimiterInterface;
    }
}
