<?php
// Autoloading for the Symfony tests: the bridge through the Composer autoloader that tests/run
// generates from bridges/composer.json (PSR-4) into $RL_VENDOR; the rate-limiter component from
// $RL_SYMFONY_RATE_LIMITER when set (an unchanged upstream copy, e.g. 7.1 from
// ../shared/frameworks: no autoloader of its own, loaded by PSR-4 here, never copied into the
// repository), else Debian's php-symfony-rate-limiter; its dependencies (OptionsResolver, Lock,
// deprecation contracts) and the rest of Symfony from Debian's /usr/share/php.
declare(strict_types=1);

$vendor = getenv('RL_VENDOR') ?: (getenv('RL_TMP') . '/vendor');
// Debian's Composer writes no InstalledVersions.php with dump-autoload, while its class map names
// it (FrameworkBundle and SecurityBundle ask whether the class exists): Debian's own copy.
if (!is_file($vendor . '/composer/InstalledVersions.php') && is_file('/usr/share/php/Composer/InstalledVersions.php')) {
    require_once '/usr/share/php/Composer/InstalledVersions.php';
}
require $vendor . '/autoload.php';

$component = getenv('RL_SYMFONY_RATE_LIMITER') ?: '/usr/share/php/Symfony/Component/RateLimiter';
if (!is_file($component . '/RateLimiterFactory.php')) {
    fwrite(STDERR, "no Symfony rate-limiter component in $component\n");
    exit(2);
}
if (is_file($component . '/autoload.php')) {
    require_once $component . '/autoload.php';
} else {
    spl_autoload_register(function (string $class) use ($component): void {
        $prefix = 'Symfony\\Component\\RateLimiter\\';
        if (str_starts_with($class, $prefix)) {
            $file = $component . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
        }
    }, true, true);
}
foreach (['Symfony/Component/OptionsResolver', 'Symfony/Component/Lock', 'Symfony/Contracts/Deprecation'] as $package) {
    if (is_file("/usr/share/php/$package/autoload.php")) {
        require_once "/usr/share/php/$package/autoload.php";
    }
}

/** The component's version as the runner names it (RL_SYMFONY_VERSION), else its family. */
function rl_symfony_version(): string
{
    return getenv('RL_SYMFONY_VERSION') ?: (method_exists(
        Symfony\Component\RateLimiter\Policy\SlidingWindow::class,
        'calculateTimeForTokens',
    ) ? '6.4+' : '5.4');
}
