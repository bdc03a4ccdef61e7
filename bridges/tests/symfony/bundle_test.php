<?php
// RateLimitBundle in a real Symfony kernel (FrameworkBundle + SecurityBundle as the distribution
// packages them), with an application's configuration as Symfony's docs write it:
// `framework.rate_limiter` entries of every policy, `framework.lock`, a firewall with
// `login_throttling`. Each test prints "ok - NAME: FIGURES" or "not ok - NAME: WHY".
//
//   php -d extension=ratelimit.so -d ratelimit.db_path=... bundle_test.php [--stand-in-7.3]
// --stand-in-7.3 declares Symfony 7.3's RateLimiterFactoryInterface first (not packaged here;
// the same declaration as upstream's), to test the alias the bundle adds where it exists.
// Env: RL_VENDOR as for limiter_spec.php; RL_TMP, a directory for the kernels' caches.
declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

$standIn = in_array('--stand-in-7.3', $argv, true);
if ($standIn) {
    eval('namespace Symfony\Component\RateLimiter; interface RateLimiterFactoryInterface { public function create(?string $key = null): LimiterInterface; }');
}
foreach (['Symfony/Bundle/FrameworkBundle', 'Symfony/Bundle/SecurityBundle'] as $package) {
    require_once "/usr/share/php/$package/autoload.php";
}

use RateLimit\Bridge\Symfony\ExtensionLimiter;
use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use RateLimit\Bridge\Symfony\LimiterFactoryInterface;
use RateLimit\Bridge\Symfony\RateLimitBundle;
use RateLimit\Bridge\Symfony\Security\ExtensionLoginRateLimiter;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\SecurityBundle\SecurityBundle;
use Symfony\Component\Config\Loader\LoaderInterface;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\DependencyInjection\Reference;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpKernel\Kernel;
use Symfony\Component\RateLimiter\RateLimiterFactory;

/** What an application's controller or service would be: arguments autowired by name. */
final class UsesLimiters
{
    public function __construct(
        public LimiterFactoryInterface $anonymousApiLimiter,
        public LimiterFactoryInterface $loginFormLimiter,
        public LimiterFactoryInterface $slidingApiLimiter,
    ) {
    }
}

/** The same, type-hinted as Symfony's docs write it (RateLimiterFactory, final up to 7.x). */
final class UsesStockType
{
    public function __construct(public RateLimiterFactory $anonymousApiLimiter)
    {
    }
}

/** As upstream's docs write it from 7.3 on. */
final class UsesStockInterface
{
    public function __construct(public Symfony\Component\RateLimiter\RateLimiterFactoryInterface $anonymousApiLimiter)
    {
    }
}

final class TestKernel extends Kernel
{
    /** @param list<class-string> $services public, autowired */
    public function __construct(string $env, private bool $bundle, private array $services, private string $dir)
    {
        parent::__construct($env, false);
    }

    public function registerBundles(): iterable
    {
        // With the bundle: the config/bundles.php of docs/frameworks.md (bridges/examples), and SecurityBundle.
        $bundles = $this->bundle ? require dirname(__DIR__, 2) . '/examples/symfony/bundles.php' : [FrameworkBundle::class => ['all' => true]];
        foreach ($bundles as $class => $envs) {
            yield new $class();
        }
        yield new SecurityBundle();
    }

    public function getProjectDir(): string
    {
        return $this->dir;
    }

    public function getCacheDir(): string
    {
        return $this->dir . '/cache/' . $this->environment;
    }

    public function getLogDir(): string
    {
        return $this->dir . '/log';
    }

    public function registerContainerConfiguration(LoaderInterface $loader): void
    {
        $services = $this->services;
        $loader->load(function (ContainerBuilder $c) use ($services) {
            // config/packages/framework.yaml and security.yaml as an application has them.
            $c->loadFromExtension('framework', [
                'secret' => 'test-secret',
                'test' => true,
                'http_method_override' => false,
                'lock' => 'flock',
                'router' => ['resource' => 'unused', 'utf8' => true],
                'rate_limiter' => [
                    'anonymous_api' => ['policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => '1 day', 'amount' => 1]],
                    'login_form' => ['policy' => 'fixed_window', 'limit' => 3, 'interval' => '15 minutes'],
                    'sliding_api' => ['policy' => 'sliding_window', 'limit' => 4, 'interval' => '1 hour'],
                ],
            ]);
            $security = [
                'providers' => ['users' => ['memory' => ['users' => ['alice' => ['password' => 'x', 'roles' => ['ROLE_USER']]]]]],
                'firewalls' => ['main' => ['lazy' => true, 'provider' => 'users', 'login_throttling' => ['max_attempts' => 3]]],
            ];
            if (Kernel::MAJOR_VERSION < 6) {
                $security['enable_authenticator_manager'] = true;
            }
            $c->loadFromExtension('security', $security);
            foreach ($services as $class) {
                if (str_starts_with($class, 'by-hand:')) {
                    // wired by hand, as services.yaml would: arguments: ['@limiter.anonymous_api']
                    $class = substr($class, strlen('by-hand:'));
                    $c->register($class, $class)->setArguments([new Reference('limiter.anonymous_api')])->setPublic(true);
                    continue;
                }
                $c->register($class, $class)->setAutowired(true)->setPublic(true);
            }
            $c->setAlias('test.login_limiter', 'security.login_throttling.main.limiter')->setPublic(true);
        });
    }
}

final class Failed extends Exception
{
}

function check(bool $ok, string $why): void
{
    if (!$ok) {
        throw new Failed($why);
    }
}

$tmp = getenv('RL_TMP') ?: sys_get_temp_dir();
$dir = $tmp . '/sf-kernel-' . bin2hex(random_bytes(4));
$boot = function (string $env, bool $bundle, array $services) use ($dir): Kernel {
    $kernel = new TestKernel($env, $bundle, $services, $dir);
    $kernel->boot();
    return $kernel;
};
$fresh = fn (string $p) => $p . '-' . bin2hex(random_bytes(6));
$tests = [];

$tests['the config/bundles.php of docs/frameworks.md is there verbatim and registers the bundle'] = function () {
    $file = dirname(__DIR__, 2) . '/examples/symfony/bundles.php';
    $snippet = trim(substr((string) file_get_contents($file), strlen("<?php\n")));
    $docs = (string) file_get_contents(dirname(__DIR__, 3) . '/docs/frameworks.md');
    check(str_contains($docs, $snippet), "docs/frameworks.md does not contain $file verbatim");
    check(array_key_exists(RateLimitBundle::class, require $file), 'no RateLimitBundle in it');
    return 'bridges/examples/symfony/bundles.php in docs/frameworks.md; the kernels below load it';
};

$tests['bundle: framework.rate_limiter entries become the extension\'s factories, autowired by name'] = function () use ($boot, $fresh) {
    $c = $boot('ext', true, [UsesLimiters::class])->getContainer();
    $uses = $c->get(UsesLimiters::class);
    check($uses instanceof UsesLimiters, 'service');
    $out = [];
    foreach (['anonymousApiLimiter' => 'token_bucket', 'loginFormLimiter' => 'fixed_window', 'slidingApiLimiter' => 'sliding_window'] as $arg => $policy) {
        $factory = $uses->$arg;
        check($factory instanceof ExtensionLimiterFactory, "$arg: " . get_class($factory));
        $limiter = $factory->create($key = $fresh('bundle'));
        check($limiter instanceof ExtensionLimiter && $limiter->getPolicy() === $policy, "$arg: policy");
        $n = 0;
        while ($limiter->consume()->isAccepted() && $n < 10) {
            $n++;
        }
        // The decisions are the extension's: its own bucket of that key says so.
        // (Symfony's token_bucket is the extension's stepped_bucket, with its amount.)
        $peek = $policy === 'token_bucket'
            ? ratelimit_peek($key, $limiter->getLimit(), $limiter->getPer(), $limiter->getScope(), 'stepped_bucket', 1)
            : ratelimit_peek($key, $limiter->getLimit(), $limiter->getPer(), $limiter->getScope(), $policy);
        check($peek->remaining === 0 && !$peek->allowed, "$arg: the extension's bucket has {$peek->remaining} left");
        $out[] = "$arg ($policy): $n accepted, the extension's bucket empty";
    }
    $denied = $uses->anonymousApiLimiter->create($k = $fresh('wait'));
    for ($i = 0; $i < 5; $i++) {
        $denied->consume();
    }
    $wait = $denied->consume()->getRetryAfter()->getTimestamp() - time();
    // whole seconds, rounded down before Symfony 6.4.50, up from it
    check($wait >= 86399 && $wait <= 86401, "5 with 1 per day: retry after $wait s");
    return implode('; ', $out) . "; 5 with 1 per day: the 6th waits $wait s";
};

$tests['bundle: login_throttling (max_attempts 3) runs on the extension, per user name and address'] = function () use ($boot, $fresh) {
    $c = $boot('ext', true, [UsesLimiters::class])->getContainer();
    $limiter = $c->get('test.login_limiter');
    check($limiter instanceof ExtensionLoginRateLimiter, 'login limiter: ' . get_class($limiter));
    $request = Request::create('/login', 'POST', [], [], [], ['REMOTE_ADDR' => '203.0.113.' . random_int(1, 250)]);
    $request->attributes->set('_security.last_username', $user = $fresh('Alice'));
    $seen = [];
    for ($i = 0; $i < 5; $i++) {
        $seen[] = $limiter->consume($request)->isAccepted() ? 'A' : 'D';
    }
    check(implode('', $seen) === 'AAADD', 'attempts: ' . implode('', $seen));
    $other = Request::create('/login', 'POST', [], [], [], ['REMOTE_ADDR' => $request->getClientIp()]);
    $other->attributes->set('_security.last_username', $fresh('bob'));
    check($limiter->consume($other)->isAccepted(), 'another user from the same address refused');
    $limiter->reset($request);
    check($limiter->consume($request)->isAccepted(), 'after reset() refused');
    return 'attempts of one user: ' . implode('', $seen) . '; another user from the address: accepted; after reset(): accepted';
};

$tests['bundle: an argument type-hinted RateLimiterFactory (final) fails the container\'s compilation, saying what to type-hint'] = function () use ($boot) {
    try {
        $boot('stocktype', true, [UsesStockType::class]);
    } catch (Throwable $e) {
        check(str_contains($e->getMessage(), 'type-hint the argument "$anonymousApiLimiter" with RateLimit\Bridge\Symfony\LimiterFactoryInterface'), 'message: ' . $e->getMessage());
        return get_class($e) . ': ' . $e->getMessage();
    }
    throw new Failed('the kernel booted');
};

$tests['bundle: a service wired by hand with a RateLimiterFactory argument fails the compilation too, naming the service'] = function () use ($boot) {
    try {
        $boot('byhand', true, ['by-hand:' . UsesStockType::class]);
    } catch (Throwable $e) {
        check(str_contains($e->getMessage(), 'The service "UsesStockType" takes "limiter.anonymous_api" as Symfony\'s final RateLimiterFactory'), 'message: ' . $e->getMessage());
        return get_class($e) . ': ' . $e->getMessage();
    }
    throw new Failed('the kernel booted');
};

$tests['without the bundle the same configuration gives Symfony\'s own factories (the control)'] = function () use ($boot) {
    $c = $boot('stock', false, [UsesStockType::class])->getContainer();
    $f = $c->get(UsesStockType::class)->anonymousApiLimiter;
    check($f instanceof RateLimiterFactory, get_class($f));
    check(!$c->get('test.login_limiter') instanceof ExtensionLoginRateLimiter, 'login limiter');
    return 'RateLimiterFactory, ' . get_class($c->get('test.login_limiter'));
};

if ($standIn) {
    $tests = [];
    $tests['bundle, Symfony 7.3\'s RateLimiterFactoryInterface declared: an argument type-hinted with it gets the extension\'s factory'] = function () use ($boot) {
        $c = $boot('iface', true, [UsesStockInterface::class])->getContainer();
        $f = $c->get(UsesStockInterface::class)->anonymousApiLimiter;
        check($f instanceof ExtensionLimiterFactory, get_class($f));
        return get_class($f);
    };
}

$failed = 0;
foreach ($tests as $name => $fn) {
    try {
        $figures = $fn();
        echo "ok - $name: $figures\n";
    } catch (Throwable $e) {
        $failed++;
        $where = $e instanceof Failed ? '' : ' (' . get_class($e) . ' at ' . basename($e->getFile()) . ':' . $e->getLine() . ')';
        echo "not ok - $name: ", $e->getMessage(), "$where\n";
    }
}
(new Symfony\Component\Filesystem\Filesystem())->remove($dir);
exit($failed === 0 ? 0 : 1);
