<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony\DependencyInjection;

use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use RateLimit\Bridge\Symfony\LimiterFactoryInterface;
use RateLimit\Bridge\Symfony\Security\ExtensionLoginRateLimiter;
use Symfony\Component\DependencyInjection\ChildDefinition;
use Symfony\Component\DependencyInjection\Compiler\CompilerPassInterface;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\DependencyInjection\Definition;
use Symfony\Component\DependencyInjection\Reference;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\Security\Http\RateLimiter\DefaultLoginRateLimiter;

/**
 * Rewrites the limiters FrameworkBundle registers from `framework.rate_limiter` (and
 * SecurityBundle's `login_throttling`, through the same code) onto the extension:
 *
 * - `limiter.<name>` (Symfony's RateLimiterFactory, a child of the abstract `limiter`) becomes an
 *   ExtensionLimiterFactory with the entry's own options (its lock and cache are dropped);
 * - autowiring: `LimiterFactoryInterface $<name>Limiter` and `ExtensionLimiterFactory
 *   $<name>Limiter` name it, and from Symfony 7.3 on `RateLimiterFactoryInterface
 *   $<name>Limiter`, Symfony's own alias, does unchanged;
 * - `RateLimiterFactory $<name>Limiter`: Symfony 5.4 to 7.x's RateLimiterFactory is a final
 *   class whose limiters decide in PHP on a cache, so no object of it can decide through the
 *   extension. Its alias is made to fail the container's compilation with a message saying what
 *   to type-hint instead (a service that never asks for it is unaffected), and so does a
 *   service wired by hand with `limiter.<name>` for such a constructor argument: never a
 *   limiter silently left off the extension, nor a TypeError at run time;
 * - `login_throttling` without a `limiter` of its own: Symfony's DefaultLoginRateLimiter, whose
 *   constructor takes only that final class, becomes ExtensionLoginRateLimiter, the same two
 *   limits (per client address, per user name and address) on the two factories above.
 */
final class ExtensionLimiterPass implements CompilerPassInterface
{
    private const STOCK_FACTORY = RateLimiterFactory::class;
    /** Symfony 7.3's interface (a string: it does not exist before). */
    private const STOCK_INTERFACE = 'Symfony\Component\RateLimiter\RateLimiterFactoryInterface';

    public function process(ContainerBuilder $container): void
    {
        $replaced = [];
        foreach ($container->getDefinitions() as $id => $definition) {
            if (!str_starts_with($id, 'limiter.') || !self::isStockFactory($container, $definition)) {
                continue;
            }
            $config = self::config($definition);
            if ($config === null) {
                continue;
            }
            $ours = new Definition(ExtensionLimiterFactory::class, [$config]);
            $ours->setPublic($definition->isPublic());
            $ours->setTags($definition->getTags());
            $container->setDefinition($id, $ours);
            $container->removeDefinition('limiter.storage.' . substr($id, \strlen('limiter.')));
            $replaced[$id] = true;
        }

        foreach ($container->getAliases() as $aliasId => $alias) {
            $target = (string) $alias;
            if (!isset($replaced[$target]) || !str_contains($aliasId, ' $')) {
                continue;
            }
            [$type, $argument] = explode(' $', $aliasId, 2);
            if ($type === self::STOCK_FACTORY) {
                $container->setAlias(LimiterFactoryInterface::class . ' $' . $argument, $target);
                $container->setAlias(ExtensionLimiterFactory::class . ' $' . $argument, $target);
                $refused = '.ratelimit.refused.' . $argument;
                $container->setDefinition($refused, (new Definition(self::STOCK_FACTORY))->addError(sprintf(
                    'The rate limiter "%s" runs on the ratelimit extension (RateLimitBundle), and Symfony\'s'
                    . ' RateLimiterFactory is a final class that cannot: type-hint the argument "$%s" with'
                    . ' %s instead (%s).',
                    substr($target, \strlen('limiter.')),
                    $argument,
                    LimiterFactoryInterface::class,
                    interface_exists(self::STOCK_INTERFACE) ? self::STOCK_INTERFACE . ' works too' : 'same create()',
                )));
                $container->setAlias($aliasId, $refused);
            }
        }
        if (interface_exists(self::STOCK_INTERFACE)) {
            foreach (array_keys($replaced) as $id) {
                $name = substr($id, \strlen('limiter.'));
                $container->registerAliasForArgument($id, self::STOCK_INTERFACE, $name . '.limiter');
            }
        }

        foreach ($container->getDefinitions() as $serviceId => $definition) {
            if ($definition->getClass() === DefaultLoginRateLimiter::class) {
                $definition->setClass(ExtensionLoginRateLimiter::class);
                continue;
            }
            self::refuseStockTypedArguments($serviceId, $definition, $replaced);
        }
    }

    /**
     * A service wired by hand (`arguments: ['@limiter.x']`) whose constructor takes the final
     * RateLimiterFactory would get a TypeError when built: fail the compilation instead, naming it.
     *
     * @param array<string, true> $replaced
     */
    private static function refuseStockTypedArguments(string $serviceId, Definition $definition, array $replaced): void
    {
        $ours = array_filter(
            $definition->getArguments(),
            fn ($argument) => $argument instanceof Reference && isset($replaced[(string) $argument]),
        );
        $class = $definition->getClass();
        if ($ours === [] || $definition->isAbstract() || $class === null) {
            return;
        }
        try {
            // Only the services given a limiter are loaded: another's class may need packages
            // that are not installed.
            $constructor = class_exists($class) ? (new \ReflectionClass($class))->getConstructor() : null;
        } catch (\Throwable) {
            return;
        }
        if ($constructor === null) {
            return;
        }
        $parameters = $constructor->getParameters();
        foreach ($ours as $key => $argument) {
            $parameter = null;
            foreach ($parameters as $i => $p) {
                if ($key === $i || $key === 'index_' . $i || $key === '$' . $p->getName()) {
                    $parameter = $p;
                }
            }
            $type = $parameter?->getType();
            if ($type instanceof \ReflectionNamedType && $type->getName() === self::STOCK_FACTORY) {
                $definition->addError(sprintf(
                    'The service "%s" takes "%s" as Symfony\'s final RateLimiterFactory (argument "$%s"), but'
                    . ' it runs on the ratelimit extension (RateLimitBundle): type-hint %s instead.',
                    $serviceId,
                    (string) $argument,
                    $parameter->getName(),
                    LimiterFactoryInterface::class,
                ));
            }
        }
    }

    private static function isStockFactory(ContainerBuilder $container, Definition $definition): bool
    {
        if ($definition instanceof ChildDefinition) {
            return $definition->getParent() === 'limiter'
                || ($container->hasDefinition($definition->getParent())
                    && self::isStockFactory($container, $container->getDefinition($definition->getParent())));
        }
        return $definition->getClass() === self::STOCK_FACTORY;
    }

    /** @return array<string, mixed>|null the entry's options, as FrameworkBundle gave them */
    private static function config(Definition $definition): ?array
    {
        $arguments = $definition->getArguments();
        $config = $arguments['index_0'] ?? $arguments[0] ?? null;
        return \is_array($config) && isset($config['id']) ? $config : null;
    }
}
