<?php
// Both bridges in one PHP process (the CLI), against the frameworks from Debian: each test
// prints "ok - NAME: FIGURES" or "not ok - NAME: WHY"; tests/run numbers the lines. Run with the
// extension loaded and ratelimit.db_path pointing at a fresh file:
//   php -d extension=$SO -d ratelimit.db_path=$DIR/unit.sqlite bridges/tests/unit.php [docs/frameworks.md]
declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use Illuminate\Cache\ArrayStore;
use Illuminate\Cache\CacheServiceProvider;
use Illuminate\Cache\RateLimiter as StockRateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository as CacheRepository;
use Illuminate\Config\Repository as ConfigRepository;
use Illuminate\Container\Container;
use Illuminate\Events\Dispatcher;
use Illuminate\Http\Exceptions\ThrottleRequestsException;
use Illuminate\Http\Request;
use Illuminate\Http\Response;
use Illuminate\Routing\Middleware\ThrottleRequests;
use Illuminate\Routing\Route;
use RateLimit\Bridge\Key;
use RateLimit\Bridge\Laravel\ExtensionRateLimiter;
use RateLimit\Bridge\Laravel\RateLimitServiceProvider;
use RateLimit\Bridge\Laravel\TooManyAttemptsException;
use RateLimit\Bridge\Symfony\ExtensionLimiter;
use RateLimit\Bridge\Symfony\ExtensionLimiterFactory;
use Symfony\Component\Config\FileLocator;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\DependencyInjection\Loader\YamlFileLoader;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\RateLimitExceededException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\NoLimiter;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

final class Failed extends Exception
{
}

function check(bool $ok, string $why): void
{
    if (!$ok) {
        throw new Failed($why);
    }
}

/** @param class-string<Throwable> $class */
function throws(string $class, Closure $fn): Throwable
{
    try {
        $fn();
    } catch (Throwable $e) {
        check($e instanceof $class, 'wanted ' . $class . ', got ' . get_class($e) . ': ' . $e->getMessage());
        return $e;
    }
    throw new Failed("wanted $class, nothing was thrown");
}

/** A subject no other test (nor an earlier run) uses. */
function fresh(string $name): string
{
    return $name . '-' . bin2hex(random_bytes(6));
}

$readme = $argv[1] ?? dirname(__DIR__, 2) . '/docs/frameworks.md';
$failed = 0;
$tests = [];

// ---------------------------------------------------------------- Symfony
$sfConfig = fn (int $limit, string $interval = '1 day', ?int $amount = null) => [
    'id' => 'unit', 'policy' => 'token_bucket', 'limit' => $limit,
    'rate' => ['interval' => $interval, 'amount' => $amount ?? $limit],
];

$tests['symfony: consume, RateLimit fields, ensureAccepted, reset'] = function () use ($sfConfig) {
    $limiter = (new ExtensionLimiterFactory($sfConfig(5)))->create(fresh('sf1'));
    $seen = [];
    for ($i = 0; $i < 6; $i++) {
        $t0 = microtime(true);
        $rl = $limiter->consume();
        $seen[] = ($rl->isAccepted() ? 'A' : 'D') . $rl->getRemainingTokens();
        check($rl->getLimit() === 5, 'getLimit() ' . $rl->getLimit());
    }
    check(implode(' ', $seen) === 'A4 A3 A2 A1 A0 D0', 'consume x6: ' . implode(' ', $seen));
    // 5 tokens per day, as Symfony reports it: they come back together a day later.
    $wait = (float) $rl->getRetryAfter()->format('U.u') - $t0;
    check($wait > 86398 && $wait <= 86400.5, "retry after $wait s, want about 86400");
    $e = throws(RateLimitExceededException::class, fn () => $rl->ensureAccepted());
    check($e->getRemainingTokens() === 0 && $e->getLimit() === 5, 'exception fields');
    $limiter->reset();
    $after = $limiter->consume();
    check($after->isAccepted() && $after->getRemainingTokens() === 4, 'after reset: ' . $after->getRemainingTokens());
    check($after->ensureAccepted() === $after, 'ensureAccepted() of an accepted limit returns it');
    return 'consume x6: ' . implode(' ', $seen) . sprintf('; retry after %.0f s; reset, then remaining 4', $wait);
};

$tests['symfony: same answers as Symfony\'s own token_bucket for one sequence of costs'] = function () use ($sfConfig) {
    $costs = [1, 2, 1, 3, 1, 0, 2, 1, 4];
    $config = $sfConfig(6);
    $stock = (new RateLimiterFactory($config, new InMemoryStorage()))->create('k');
    $bridge = (new ExtensionLimiterFactory($config))->create(fresh('sf2'));
    $a = $b = [];
    foreach ($costs as $cost) {
        foreach ([[$stock, &$a], [$bridge, &$b]] as [$limiter, &$out]) {
            $rl = $limiter->consume($cost);
            $out[] = ($rl->isAccepted() ? 'A' : 'D') . $rl->getRemainingTokens() . '/' . $rl->getLimit();
        }
        unset($out);
    }
    check($a === $b, 'stock ' . implode(' ', $a) . ' vs bridge ' . implode(' ', $b));
    return 'costs ' . implode(',', $costs) . ': both ' . implode(' ', $b);
};

$tests['symfony: reserve() books ahead within maxTime, tokens beyond the burst or negative refused, consume(0) takes nothing'] = function () use ($sfConfig) {
    $limiter = (new ExtensionLimiterFactory($sfConfig(3, '3 seconds')))->create(fresh('sf3'));
    $now = $limiter->reserve(3);
    $ahead = $limiter->reserve(1, 10.0);
    $refused = throws(MaxWaitDurationExceededException::class, fn () => $limiter->reserve(3, 1.5));
    // 3 back at each whole 3 s, as Symfony's bucket: the 4th token comes with the first step.
    check($now->getWaitDuration() < 0.05 && abs($ahead->getWaitDuration() - 3.0) < 0.05, sprintf('waits %.3f, %.3f', $now->getWaitDuration(), $ahead->getWaitDuration()));
    check(!$ahead->getRateLimit()->isAccepted(), 'a booking ahead is not accepted now');
    $limiter->reset();
    $e = throws(InvalidArgumentException::class, fn () => $limiter->consume(4));
    throws(InvalidArgumentException::class, fn () => $limiter->consume(-1));
    $limiter->consume(2);
    $peeks = [$limiter->consume(0), $limiter->consume(0)];
    foreach ($peeks as $p) {
        check($p->isAccepted() && $p->getRemainingTokens() === 1, 'consume(0): ' . $p->getRemainingTokens());
    }
    return sprintf('reserve(3), reserve(1): waits %.2f, %.2f s; reserve(3, 1.5): MaxWaitDurationExceededException; consume(4) of 3: "', $now->getWaitDuration(), $ahead->getWaitDuration()) . '' . $e->getMessage() . '"; consume(0) twice: remaining 1, 1';
};

$tests['symfony: factory reads token_bucket options as Symfony does, refuses what it cannot honour'] = function () {
    $f = fn (array $c) => (new ExtensionLimiterFactory($c))->create('x');
    $api = $f(['id' => 'anonymous_api', 'policy' => 'token_bucket', 'limit' => 100, 'rate' => ['interval' => '1 minute', 'amount' => 10]]);
    check($api instanceof ExtensionLimiter && $api->getPer() === 60.0 && $api->getLimit() === 100 && $api->getScope() === 'anonymous_api',
        'limit 100, 10 per minute: per ' . ($api instanceof ExtensionLimiter ? $api->getPer() : '?'));
    $one = $f(['id' => 'x', 'policy' => 'token_bucket', 'limit' => 4, 'rate' => ['interval' => '15 seconds']]);
    check($one instanceof ExtensionLimiter && $one->getPer() === 15.0, 'amount defaults to 1');
    $fixed = $f(['id' => 'x', 'policy' => 'fixed_window', 'limit' => 5, 'interval' => '10 seconds']);
    check($fixed instanceof ExtensionLimiter && $fixed->getPer() === 10.0, 'fixed_window');
    check($f(['id' => 'x', 'policy' => 'no_limit']) instanceof NoLimiter, 'no_limit');
    $odd = $f(['id' => 'login form (admin)', 'policy' => 'fixed_window', 'limit' => 5, 'interval' => '1 hour']);
    check($odd instanceof ExtensionLimiter && preg_match('/^login_form__admin_\.[0-9a-f]{8}$/', $odd->getScope()) === 1, 'scope ' . ($odd instanceof ExtensionLimiter ? $odd->getScope() : '?'));
    $sliding = $f(['id' => 'x', 'policy' => 'sliding_window', 'limit' => 5, 'interval' => '1 hour']);
    check($sliding instanceof ExtensionLimiter && $sliding->getPolicy() === 'sliding_window' && $sliding->getPer() === 3600.0, 'sliding_window');
    throws(LogicException::class, fn () => $f(['id' => 'x', 'policy' => 'leaky_bucket', 'limit' => 5, 'interval' => '1 hour']));
    throws(LogicException::class, fn () => $f(['id' => 'x', 'policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => 'fortnightly-ish']]));
    throws(InvalidArgumentException::class, fn () => $f(['id' => 'x', 'policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => '1 hour'], 'limt' => 3]));
    throws(InvalidArgumentException::class, fn () => $f(['id' => 'x', 'policy' => 'token_bucket', 'limit' => 0, 'rate' => ['interval' => '1 hour']]));
    throws(InvalidArgumentException::class, fn () => $f(['policy' => 'token_bucket', 'limit' => 5, 'rate' => ['interval' => '1 hour']]));
    return '100 burst, 10 per minute -> bucket of 100 refilled in 600 s; fixed_window 5 per 10 s -> 5 per 10 s; '
        . 'sliding_window 5 per hour; no_limit -> NoLimiter; scope of "login form (admin)": ' . $odd->getScope() . '; an unknown policy, bad interval, unknown option, limit 0, no id: refused';
};

$tests['symfony: null and "" keys share one bucket, a 2000-byte key works'] = function () use ($sfConfig) {
    $factory = new ExtensionLimiterFactory(['id' => fresh('sf5'), 'policy' => 'token_bucket', 'limit' => 2, 'rate' => ['interval' => '1 day']]);
    $a = $factory->create(null)->consume();
    $b = $factory->create('')->consume();
    check($a->getRemainingTokens() === 1 && $b->getRemainingTokens() === 0, 'null then "": ' . $a->getRemainingTokens() . ', ' . $b->getRemainingTokens());
    $long = $factory->create(str_repeat('k', 2000))->consume();
    check($long->isAccepted() && $long->getRemainingTokens() === 1, 'long key');
    check(Key::subject(str_repeat('k', 2000)) !== Key::subject(str_repeat('k', 2001)), 'long keys distinct');
    return 'create(null) then create(""): remaining 1, 0; 2000-byte key: accepted, remaining 1';
};

$tests['keys: a client key that spells one of the bridge\'s own subjects (NUL-prefixed) gets a bucket of its own'] = function () {
    $factory = new ExtensionLimiterFactory(['id' => fresh('sfnul'), 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 day']);
    $global = $factory->create(null)->consume();
    $spelled = $factory->create("\0global")->consume();
    $long = str_repeat('k', 2000);
    $hashed = "\0sha256:" . hash('sha256', $long, true);
    check($global->isAccepted() && $spelled->isAccepted(), 'create(null), then create("\0global"): ' . var_export($global->isAccepted(), true) . ', ' . var_export($spelled->isAccepted(), true));
    check(Key::subject($hashed) !== Key::subject($long), 'the key "\0sha256:" . sha256(long key) is not the long key\'s subject');
    return 'create(null) then create("\0global") on a limit of 1: both accepted; "\0sha256:<hash>" apart from the long key';
};

$tests['symfony: inflight option holds a slot until release()'] = function () {
    $factory = new ExtensionLimiterFactory(['id' => 'unit_inflight', 'policy' => 'token_bucket', 'limit' => 10, 'rate' => ['interval' => '1 day'], 'inflight' => 1]);
    $key = fresh('sf6');
    $first = $factory->create($key);
    check($first instanceof ExtensionLimiter, 'limiter class');
    $a = $first->consume();
    $second = $factory->create($key);
    check($second instanceof ExtensionLimiter, 'limiter class');
    $d = $second->decide();
    $freed = $first->release();
    $c = $second->consume();
    check($a->isAccepted() && !$d->allowed && $d->reason === 'inflight' && $freed === 1 && $c->isAccepted(),
        "first {$a->isAccepted()}, second {$d->reason}, freed $freed, then {$c->isAccepted()}");
    return "first consume accepted; second: {$d->reason}; release() freed $freed; then accepted";
};

$tests['symfony: the services.yaml of docs/frameworks.md loads into Symfony\'s container and serves the limiter'] = function () use ($readme) {
    $file = dirname(__DIR__) . '/examples/symfony/services.yaml';
    $yaml = (string) file_get_contents($file);
    check(str_contains((string) file_get_contents($readme), $yaml), "docs/frameworks.md does not contain $file verbatim");
    $container = new ContainerBuilder();
    (new YamlFileLoader($container, new FileLocator(dirname($file))))->load('services.yaml');
    $container->getDefinition('limiter.anonymous_api')->setPublic(true);
    $alias = 'RateLimit\\Bridge\\Symfony\\LimiterFactoryInterface $anonymousApiLimiter';
    check($container->hasAlias($alias) && (string) $container->getAlias($alias) === 'limiter.anonymous_api', "no alias $alias");
    $container->compile();
    $factory = $container->get('limiter.anonymous_api');
    check($factory instanceof ExtensionLimiterFactory, 'service class ' . get_debug_type($factory));
    $limiter = $factory->create(fresh('sf7'));
    check($limiter instanceof LimiterInterface, 'create()');
    $rl = $limiter->consume();
    check($rl->isAccepted() && $rl->getRemainingTokens() === 99 && $rl->getLimit() === 100, 'consume: ' . $rl->getRemainingTokens());
    check($limiter instanceof ExtensionLimiter && $limiter->getPer() === 60.0, 'per');
    $headers = $limiter->decide()->headers();
    check(($headers['RateLimit-Policy'] ?? '') === '"anonymous_api";q=100;w=600', 'headers ' . json_encode($headers));
    return 'limiter.anonymous_api: ' . get_class($factory) . ', consume: accepted, 99 of 100 left; RateLimit-Policy: ' . $headers['RateLimit-Policy'];
};

$tests['composer.json refuses the framework versions not tested (docs/install.md: "refuses the others through conflict")'] = function () {
    require_once '/usr/share/php/Composer/Semver/autoload.php';
    $conflict = json_decode((string) file_get_contents(dirname(__DIR__) . '/composer.json'), true)['conflict'] ?? [];
    $refused = fn (string $package, string $version) => isset($conflict[$package])
        && Composer\Semver\Semver::satisfies($version, $conflict[$package]);
    $want = [
        'illuminate/cache' => ['8.83.26' => false, '9.52.0' => true, '10.48.0' => false, '12.1.0' => false, '13.0.0' => true],
        'symfony/rate-limiter' => ['5.3.0' => true, '5.4.45' => false, '6.2.0' => true, '6.4.50' => false, '7.1.0' => false, '8.0.0' => true],
    ];
    $wrong = [];
    foreach ($want as $package => $versions) {
        foreach ($versions as $version => $refuse) {
            if ($refused($package, $version) !== $refuse) {
                $wrong[] = "$package $version " . ($refuse ? 'accepted' : 'refused');
            }
        }
    }
    check($wrong === [], implode(', ', $wrong));
    return 'Laravel 9 and 13, Symfony 5.3, 6.2 and 8.0 refused; 8.83, 10.48, 12.1, 5.4, 6.4, 7.1 accepted';
};

// ---------------------------------------------------------------- Laravel
$tests['laravel: attempt() runs the callback only within maxAttempts, like the stock limiter'] = function () {
    $stock = new StockRateLimiter(new CacheRepository(new ArrayStore()));
    $bridge = new ExtensionRateLimiter();
    $key = fresh('lv1');
    $a = $b = [];
    $ran = 0;
    for ($i = 0; $i < 7; $i++) {
        $a[] = var_export($stock->attempt($key, 5, fn () => 'sent', 100), true);
        $b[] = var_export($bridge->attempt($key, 5, function () use (&$ran) {
            $ran++;
            return 'sent';
        }, 100), true);
    }
    check($a === $b && $ran === 5, 'stock ' . implode(' ', $a) . ' vs bridge ' . implode(' ', $b) . ", ran $ran");
    check($bridge->attempt(fresh('lv1b'), 5, fn () => null) === true, 'falsy callback result gives true');
    return 'attempt x7 (max 5): both ' . implode(' ', $b) . "; callback ran $ran times";
};

$tests['laravel: tooManyAttempts, hit, attempts, remaining, availableIn, clear on the bucket'] = function () {
    $stock = new StockRateLimiter(new CacheRepository(new ArrayStore()));
    $bridge = new ExtensionRateLimiter();
    $key = fresh('lv2');
    $trace = function (StockRateLimiter $l) use ($key): string {
        $t = [];
        for ($i = 0; $i < 6; $i++) {
            $too = $l->tooManyAttempts($key, 5);
            $t[] = $too ? 'T' : ('h' . $l->hit($key, 100));
        }
        $t[] = 'a' . $l->attempts($key) . ' r' . $l->remaining($key, 5);
        $l->clear($key);
        $t[] = 'clear a' . $l->attempts($key) . ' r' . $l->remaining($key, 5) . ' ' . var_export($l->tooManyAttempts($key, 5), true);
        return implode(' ', $t);
    };
    $s = $trace($stock);
    $b = $trace($bridge);
    check($s === $b, "stock [$s] vs bridge [$b]");
    // availableIn: to the end of the window (100 s), as stock (tests/laravel_parity.php compares more).
    for ($i = 0; $i < 5; $i++) {
        $bridge->hit($key, 100);
    }
    $in = $bridge->availableIn($key);
    check($in === 100, "availableIn $in, want 100");
    return "both: $b; availableIn after 5 hits (decay 100): $in s (the window's end)";
};

$tests['laravel: check-then-hit stays exact when another worker takes the last token in between'] = function () {
    $key = fresh('lv3');
    $workerA = new ExtensionRateLimiter();
    $workerB = new ExtensionRateLimiter();
    $told = $workerA->tooManyAttempts($key, 1);     // A: go ahead
    $bTook = $workerB->attempt($key, 1, fn () => true, 60);   // B takes the only token
    $e = throws(ThrottleRequestsException::class, fn () => $workerA->hit($key, 60));
    check(!$told && $bTook === true, 'setup');
    check($e instanceof ThrottleRequestsException && $e->getStatusCode() === 429, 'a 429 ThrottleRequestsException');
    check($e->getPrevious() instanceof TooManyAttemptsException, 'previous: ' . get_debug_type($e->getPrevious()));
    $h = $e->getHeaders();
    check(($h['Retry-After'] ?? 0) === 60 && ($h['X-RateLimit-Limit'] ?? 0) === 1 && ($h['X-RateLimit-Remaining'] ?? -1) === 0, 'headers ' . json_encode($h));
    // A hit that nobody checked first counts on, as stock's.
    $over = $workerA->hit($key, 60);
    check($over === 3, "unchecked hit past the limit: $over");
    return 'A told to go ahead, B took the attempt, A hit(): 429 ThrottleRequestsException (previous: TooManyAttemptsException), Retry-After ' . $h['Retry-After'] . "; an unchecked hit after them: returns $over (the count, as stock)";
};

$tests['laravel: attempt() with max 1 runs one callback per key when 8 processes race for it'] = function () {
    // Real processes at the same instants (no simulated interleaving): the count and the timer
    // are two steps of the store, and a worker between them must never let another worker's
    // attempt() take its fresh count for a stale one and reset it.
    $so = (string) getenv('RL_SO');
    check(is_file($so), "RL_SO (the extension) needed, got '$so'");
    $child = '$l = new RateLimit\Bridge\Laravel\ExtensionRateLimiter(scope: "unit_race");'
        . '[, $key, $start] = $argv; $out = "";'
        . 'for ($r = 0; $r < 30; $r++) { while (microtime(true) < $start + $r * 0.25) { usleep(200); }'
        . '$out .= $l->attempt("$key-$r", 1, fn () => true, 600) === true ? "1" : "0"; } echo $out;';
    $boot = 'require ' . var_export(__DIR__ . '/bootstrap.php', true) . ';';
    $key = fresh('lvrace');
    $start = microtime(true) + 2.0;
    $procs = [];
    for ($i = 0; $i < 8; $i++) {
        $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'ratelimit.db_path=' . ini_get('ratelimit.db_path'),
            '-d', 'ratelimit.busy_timeout_ms=10000', '-r', $boot . $child, '--', $key, (string) $start];
        $procs[] = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes) ?: throw new Failed('proc_open');
        $outs[] = $pipes;
    }
    $ran = array_fill(0, 30, 0);
    foreach ($procs as $i => $p) {
        $out = stream_get_contents($outs[$i][1]);
        $err = stream_get_contents($outs[$i][2]);
        proc_close($p);
        check(strlen($out) === 30, "process $i: '$out' $err");
        foreach (str_split($out) as $r => $c) {
            $ran[$r] += (int) $c;
        }
    }
    check($ran === array_fill(0, 30, 1), 'callbacks per key: ' . implode(' ', $ran));
    return '8 processes x 30 keys, attempt(max 1) at the same instant: callbacks per key ' . implode(' ', $ran);
};

$tests['laravel: an attempt() that took nothing (a shadow scope\'s would-be denial) gives nothing back when its callback throws'] = function () {
    // A shadow scope (ratelimit.dry_run) runs the callback of a would-be denial, which took
    // nothing: a refund then would take back the attempt that did count.
    $so = (string) getenv('RL_SO');
    check(is_file($so), "RL_SO (the extension) needed, got '$so'");
    $child = '$l = new RateLimit\Bridge\Laravel\ExtensionRateLimiter(scope: "unit_shadow");'
        . '[, $key] = $argv; $out = [];'
        . '$out[] = var_export($l->attempt($key, 1, fn () => "ran", 600), true);'
        . 'try { $l->attempt($key, 1, fn () => throw new RuntimeException("failed"), 600); } catch (RuntimeException $e) { $out[] = "threw"; }'
        . '$out[] = "a" . $l->attempts($key);'
        . 'echo implode(" ", $out);';
    $boot = 'require ' . var_export(__DIR__ . '/bootstrap.php', true) . ';';
    $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'ratelimit.db_path=' . ini_get('ratelimit.db_path'),
        '-d', 'ratelimit.dry_run=unit_shadow', '-r', $boot . $child, '--', fresh('lvshadow')];
    $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes) ?: throw new Failed('proc_open');
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    proc_close($p);
    check($out === "'ran' threw a1", "want 'ran' threw a1, got '$out' $err");
    return "max 1 in a shadow scope: an attempt that runs, one whose would-be denial throws: $out";
};

$tests['laravel: the stock throttle middleware (named and unnamed) on the bridge'] = function () {
    $limiter = new ExtensionRateLimiter();
    $mw = new ThrottleRequests($limiter);
    $key = fresh('lv4');
    $limiter->for('api', fn (Request $r) => Limit::perMinute(3)->by($r->query('u')));
    $request = Request::create('/x?u=' . $key, 'GET', [], [], [], ['REMOTE_ADDR' => '203.0.113.9']);
    $request->setRouteResolver(fn () => new Route('GET', '/x', []));
    $out = [];
    foreach (['api', null] as $named) {
        $codes = [];
        for ($i = 0; $i < 5; $i++) {
            try {
                $args = $named === null ? [3, 1, $key] : ['api'];
                $response = $mw->handle($request, fn () => new Response('ok'), ...$args);
                $codes[] = $response->getStatusCode() . '(' . $response->headers->get('X-RateLimit-Remaining') . ')';
            } catch (ThrottleRequestsException $e) {
                $codes[] = $e->getStatusCode() . '(Retry-After ' . $e->getHeaders()['Retry-After'] . ')';
            }
        }
        $out[] = ($named === null ? 'throttle:3,1' : 'throttle:api') . ': ' . implode(' ', $codes);
    }
    $want = '200(2) 200(1) 200(0) 429(Retry-After 60) 429(Retry-After 60)';
    check($out === ["throttle:api: $want", "throttle:3,1: $want"], implode('; ', $out));
    return implode('; ', $out);
};

$tests['laravel: the service provider binds the bridge, also after Laravel\'s CacheServiceProvider loads'] = function () use ($readme) {
    $files = [];
    foreach (['app', 'ratelimit'] as $name) {
        $files[$name] = dirname(__DIR__) . "/examples/laravel/config/$name.php";
        $snippet = trim(substr((string) file_get_contents($files[$name]), strlen("<?php\n")));
        check(str_contains((string) file_get_contents($readme), $snippet), "docs/frameworks.md does not contain {$files[$name]} verbatim");
    }
    $config = require $files['ratelimit'];
    $app = new Container();
    $app->instance('config', new ConfigRepository([
        'cache' => ['default' => 'array', 'stores' => ['array' => ['driver' => 'array']]],
        'ratelimit' => ['scope' => 'app_limits'] + $config,
    ]));
    $providers = (require $files['app'])['providers'];
    check($providers === [RateLimitServiceProvider::class], 'providers ' . json_encode($providers));
    foreach ($providers as $provider) {
        (new $provider($app))->register();
    }
    $first = $app->make(StockRateLimiter::class);
    // What the deferred CacheServiceProvider does when the cache is first used: bind the stock one again.
    (new CacheServiceProvider($app))->register();
    $app->forgetInstance(StockRateLimiter::class);
    $again = $app->make(StockRateLimiter::class);
    $mw = $app->make(ThrottleRequests::class);
    $inner = (fn () => $this->limiter)->call($mw);
    check($first instanceof ExtensionRateLimiter && $again instanceof ExtensionRateLimiter && $inner === $again
        && $app->make(StockRateLimiter::class) === $again, 'bound: ' . get_class($first) . ', ' . get_class($again));
    $key = fresh('lv5');
    $again->hit($key, 60);
    check(ratelimit_peek(Key::subject($key), limit: 60, per: 60.0, scope: 'app_limits', policy: 'fixed_window')->remaining === 59, 'config scope used');
    return 'make(Illuminate\Cache\RateLimiter): ' . get_class($again) . ' (also after CacheServiceProvider re-binds it); ThrottleRequests gets it; scope from config: app_limits';
};

$tests['laravel: inflight option: attempt() holds a slot while its callback runs'] = function () {
    $limiter = new ExtensionRateLimiter(inflight: 1);
    $key = fresh('lv6');
    $inner = null;
    $outer = $limiter->attempt($key, 10, function () use ($limiter, $key, &$inner) {
        $inner = $limiter->attempt($key, 10, fn () => 'nested', 60);
        return 'outer';
    }, 60);
    $after = $limiter->attempt($key, 10, fn () => 'after', 60);
    check($outer === 'outer' && $inner === false && $after === 'after', "outer $outer, inner " . var_export($inner, true) . ", after $after");
    return 'inflight 1: a nested attempt() during the callback: false; after it returned: runs';
};

$tests['laravel: under Octane the provider ends each HTTP request\'s leases on RequestTerminated; without Octane it listens to nothing'] = function () {
    $event = RateLimitServiceProvider::OCTANE_REQUEST_TERMINATED;
    $boot = function (): array {
        $app = new Container();
        $app->instance('events', $events = new Dispatcher($app));
        $app->instance('config', new ConfigRepository(['ratelimit' => ['inflight' => 1]]));
        $provider = new RateLimitServiceProvider($app);
        $provider->register();
        $provider->boot();
        return [$app, $events];
    };
    // Octane is not packaged here: first without it, as an application without Octane runs.
    check(!class_exists($event), "$event exists before the test declares it");
    [, $events] = $boot();
    check(!$events->hasListeners($event), 'a listener without Octane');
    // Octane's event class (its constructor takes the application, the sandbox, the request and
    // the response): a stand-in of the same name, dispatched as Octane's worker does.
    eval('namespace Laravel\Octane\Events; class RequestTerminated { public function __construct(public $app = null, public $sandbox = null, public $request = null, public $response = null) {} }');
    [$app, $events] = $boot();
    check($events->hasListeners($event), 'no listener with Octane');
    $limiter = $app->make(StockRateLimiter::class);
    $keys = [fresh('oct1'), fresh('oct2')];
    $seen = [];
    // Three HTTP requests of one worker, each taking the keys' only slot and forgetting it.
    for ($request = 0; $request < 3; $request++) {
        foreach ($keys as $key) {
            $seen[] = $limiter->hit($key, 60);
        }
        $own = ratelimit_acquire(fresh('oct-own'), 10, 60, 1);
        $seen[] = $own->reason;
        $events->dispatch(new $event($app, $app, null, null));
        $seen[] = 'end';
    }
    $want = [];
    for ($request = 0; $request < 3; $request++) {
        $want = array_merge($want, [$request + 1, $request + 1, 'ok', 'end']);
    }
    check($seen === $want, 'hits and ends: ' . json_encode($seen));
    check(ratelimit_end_request() === 0, 'leases left after the last RequestTerminated');
    // The slots are real: within one request a second hit of a key is refused (a 429).
    $first = $limiter->hit($keys[0], 60);
    $e = throws(ThrottleRequestsException::class, fn () => $limiter->hit($keys[0], 60));
    check($first === 4 && $e->getStatusCode() === 429, "two hits in one request: $first, then " . $e->getStatusCode());
    $events->dispatch(new $event($app, $app, null, null));
    return 'without Octane: no listener; with it, 3 requests x (2 hits with inflight 1 + 1 own lease), each ended by RequestTerminated: ' . json_encode($seen) . "; two hits in one request: $first, then a 429";
};

foreach ($tests as $name => $fn) {
    try {
        $figures = $fn();
        echo "ok - $name: $figures\n";
    } catch (Throwable $e) {
        $failed++;
        $where = $e instanceof Failed ? '' : ' (' . get_class($e) . ' at ' . basename($e->getFile()) . ':' . $e->getLine() . ')';
        echo "not ok - $name: " . $e->getMessage() . "$where\n";
    }
}
exit($failed === 0 ? 0 : 1);
