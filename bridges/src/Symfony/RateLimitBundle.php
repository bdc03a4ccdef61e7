<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use RateLimit\Bridge\Symfony\DependencyInjection\ExtensionLimiterPass;
use Symfony\Component\DependencyInjection\Compiler\PassConfig;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\HttpKernel\Bundle\Bundle;

/**
 * Puts every `framework.rate_limiter` entry, and the limiters `login_throttling` builds, on the
 * extension, with the application's configuration unchanged: add it to config/bundles.php.
 * What it does to the container: see ExtensionLimiterPass.
 */
final class RateLimitBundle extends Bundle
{
    public function build(ContainerBuilder $container): void
    {
        // Before optimization: after every extension (FrameworkBundle, SecurityBundle) has
        // registered its limiters, before autowiring resolves the arguments that name them.
        $container->addCompilerPass(new ExtensionLimiterPass(), PassConfig::TYPE_BEFORE_OPTIMIZATION, 100);
    }
}
