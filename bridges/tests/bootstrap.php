<?php
// Autoloading for the tests: the bridge through the Composer autoloader that tests/run generates
// from bridges/composer.json (PSR-4) into $RL_TMP/vendor, the frameworks through Debian's
// autoloaders in /usr/share/php (php-symfony-*, php-illuminate-*).
declare(strict_types=1);

$vendor = getenv('RL_VENDOR') ?: (getenv('RL_TMP') . '/vendor');
require $vendor . '/autoload.php';
foreach ([
    'Symfony/Component/RateLimiter', 'Symfony/Component/Cache', 'Symfony/Component/Lock',
    'Symfony/Component/DependencyInjection', 'Symfony/Component/Config', 'Symfony/Component/Yaml',
    'Illuminate/Cache', 'Illuminate/Filesystem', 'Illuminate/Container', 'Illuminate/Config',
    'Illuminate/Routing', 'Illuminate/Events', 'Illuminate/Http',
] as $package) {
    require_once '/usr/share/php/' . $package . '/autoload.php';
}
