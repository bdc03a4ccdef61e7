<?php
// One Laravel rate decision per request, by the stock RateLimiter on a file cache or by the
// bridge (bound by its service provider); the same code for both but for the binding:
//   ?impl=bridge|stock&via=attempt|throttle|named&s=KEY&limit=5 (&ms=N sleeps N ms after deciding)
// via=attempt:  RateLimiter::attempt($s, $limit, ..., 86400)
// via=throttle: a route with the stock middleware 'throttle:$limit,1440,$s' through the Router
// via=named:    a route with 'throttle:fpm', RateLimiter::for('fpm', Limit::perDay($limit)->by($s))
// 200 when admitted, 429 when not; X-RateLimit-Reason: ok, rate, or rate-race when the 429 came
// from the bridge's hit() after a passing tooManyAttempts() (another worker took the last token
// in between).
declare(strict_types=1);

require dirname(__DIR__) . '/bootstrap.php';

use Illuminate\Cache\FileStore;
use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository;
use Illuminate\Container\Container;
use Illuminate\Events\Dispatcher;
use Illuminate\Filesystem\Filesystem;
use Illuminate\Http\Exceptions\ThrottleRequestsException;
use Illuminate\Http\Request;
use Illuminate\Routing\Middleware\ThrottleRequests;
use Illuminate\Routing\Router;
use RateLimit\Bridge\Laravel\RateLimitServiceProvider;
use RateLimit\Bridge\Laravel\TooManyAttemptsException;

header('X-Worker-Pid: ' . getmypid());
$limit = (int) ($_GET['limit'] ?? 5);
$key = (string) ($_GET['s'] ?? 'demo');
$via = (string) ($_GET['via'] ?? 'attempt');

$app = new Container();
Container::setInstance($app);
if (($_GET['impl'] ?? '') === 'bridge') {
    (new RateLimitServiceProvider($app))->register();
} else {
    $cache = getenv('RL_TMP') . '/lv-stock-cache';
    $app->singleton(RateLimiter::class, fn () => new RateLimiter(new Repository(new FileStore(new Filesystem(), $cache))));
}
$limiter = $app->make(RateLimiter::class);

$status = 200;
$race = false;
if ($via === 'attempt') {
    $status = $limiter->attempt($key, $limit, fn () => true, 86400) ? 200 : 429;
} else {
    $limiter->for('fpm', fn (Request $r) => Limit::perDay($limit)->by((string) $r->query('s')));
    $router = new Router(new Dispatcher($app), $app);
    $router->aliasMiddleware('throttle', ThrottleRequests::class);
    // nginx runs this file as the script (SCRIPT_NAME /laravel.php): the route is its path info.
    $router->get('/', fn () => "ok\n")
        ->middleware($via === 'named' ? 'throttle:fpm' : "throttle:$limit,1440,$key");
    try {
        $status = $router->dispatch(Request::capture())->getStatusCode();
    } catch (ThrottleRequestsException $e) {
        $status = $e->getStatusCode();
        $race = $e->getPrevious() instanceof TooManyAttemptsException;
    }
}

header('X-RateLimit-Reason: ' . ($status === 200 ? 'ok' : ($race ? 'rate-race' : 'rate')));
if (isset($_GET['ms'])) {
    usleep(1000 * (int) $_GET['ms']);
}
http_response_code($status);
echo $status === 200 ? "ok\n" : "Too Many Requests\n";
