<?php
// One Laravel rate decision per request, by the stock RateLimiter on a file cache or by the
// bridge (bound by its service provider); the same code for both but for the binding:
//   ?impl=bridge|stock&via=attempt|throttle|named&s=KEY&limit=5 (&ms=N sleeps N ms after deciding)
// via=attempt:  RateLimiter::attempt($s, $limit, ..., 86400)
// via=hitcmp:   if (RateLimiter::hit($s, 86400) > $limit) 429 (hit, then compare its count)
// via=throttle: a route with the stock middleware 'throttle:$limit,1440,$s' through the Router
// via=named:    a route with 'throttle:fpm', RateLimiter::for('fpm', Limit::perDay($limit)->by($s))
// &inflight=N (bridge): config ratelimit.inflight = N; &hold=MS: the route holds MS ms and counts
// the requests inside it in $RL_TMP/inside-<md5 of s>.log ("enter <n>" / "exit <n>" under a lock).
// 200 when admitted, 429 when not; X-RateLimit-Reason: ok, rate, or rate-race when the 429 came
// from the bridge's hit() after a passing tooManyAttempts() (another worker took the last token
// in between).
declare(strict_types=1);

require dirname(__DIR__) . '/bootstrap.php';

use Illuminate\Cache\FileStore;
use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository;
use Illuminate\Config\Repository as Config;
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
    $app->instance('config', new Config(['ratelimit' => ['inflight' => (int) ($_GET['inflight'] ?? 0)]]));
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
} elseif ($via === 'hitcmp') {
    $status = $limiter->hit($key, 86400) > $limit ? 429 : 200;
} else {
    $limiter->for('fpm', fn (Request $r) => Limit::perDay($limit)->by((string) $r->query('s')));
    $router = new Router(new Dispatcher($app), $app);
    $router->aliasMiddleware('throttle', ThrottleRequests::class);
    // nginx runs this file as the script (SCRIPT_NAME /laravel.php): the route is its path info.
    $router->get('/', function () use ($key) {
        if (isset($_GET['hold'])) {
            $base = getenv('RL_TMP') . '/inside-' . md5($key);
            inside($base, +1);
            usleep(1000 * (int) $_GET['hold']);
            inside($base, -1);   // before the request ends (and its lease with it)
        }
        return "ok\n";
    })
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

function inside(string $base, int $delta): void
{
    $f = fopen("$base.count", 'c+');
    flock($f, LOCK_EX);
    $n = (int) stream_get_contents($f) + $delta;
    ftruncate($f, 0);
    rewind($f);
    fwrite($f, (string) $n);
    file_put_contents("$base.log", ($delta > 0 ? 'enter' : 'exit') . " $n\n", FILE_APPEND);
    flock($f, LOCK_UN);
    fclose($f);
}
