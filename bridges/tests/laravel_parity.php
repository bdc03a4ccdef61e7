<?php
// The Laravel bridge against the stock Illuminate\Cache\RateLimiter of one Laravel version: the
// same call sequences through the stock limiter (on a file cache) and through the
// bridge, on one faked clock, and the answers compared. One behaviour per test; each prints
// "ok - laravel VERSION: NAME: FIGURES" or "not ok - ...".
//
//   php -d extension=$SO -d ratelimit.db_path=$DIR/p.sqlite bridges/tests/laravel_parity.php VERSION [DIR]
//
// VERSION is the label printed (8, 10, 11, 12). DIR: a folder holding the upstream files
// RateLimiter.php, Limit.php, Unlimited.php and ThrottleRequests.php of that version (loaded
// before anything else, over the framework from the system's packages, which supply the rest:
// the cache, the container, HTTP); without DIR the system's own Laravel is the one tested.
// A DIR given but absent is a failure, never a skip.
//
// The clock: the script runs itself again under libfaketime, with the extension preloaded so
// that its clock is faked too (PHP dlopen()s extensions with RTLD_DEEPBIND), on a frozen
// clock read from a file that the tests rewrite to move time (FAKETIME_TIMESTAMP_FILE with
// FAKETIME_NO_CACHE). Carbon (stock) and the extension (bridge) read the same instant.
declare(strict_types=1);

[$self, $version, $dir] = $argv + [1 => '', 2 => null];
if ($version === '') {
    fwrite(STDERR, "usage: laravel_parity.php VERSION [DIR]\n");
    exit(2);
}

if (getenv('RL_PARITY_CLOCK') === false) {
    $so = (string) getenv('RL_SO');
    $faketime = glob('/usr/lib/*/faketime/libfaketime.so.1')[0] ?? '';
    if ($so === '' || !is_file($so) || $faketime === '') {
        echo "not ok - laravel $version: the clock: needs RL_SO (the extension) and libfaketime (got '$so', '$faketime')\n";
        exit(1);
    }
    $clock = tempnam(sys_get_temp_dir(), 'rl-clock');
    file_put_contents($clock, '2030-01-01 00:00:00');
    // The extension as this process has it: from an ini file of PHP's scan dir, or -d here.
    $cmd = str_contains((string) php_ini_scanned_files(), 'ratelimit') ? [PHP_BINARY] : [PHP_BINARY, '-d', 'extension=' . $so];
    foreach (['ratelimit.db_path', 'ratelimit.key_file', 'ratelimit.busy_timeout_ms'] as $ini) {
        if ((string) ini_get($ini) !== '') {
            array_push($cmd, '-d', "$ini=" . ini_get($ini));
        }
    }
    array_push($cmd, $self, $version);
    if ($dir !== null) {
        $cmd[] = $dir;
    }
    $env = getenv() + [];
    $env = [
        'RL_PARITY_CLOCK' => $clock, 'FAKETIME_TIMESTAMP_FILE' => $clock, 'FAKETIME_NO_CACHE' => '1',
        'DONT_FAKE_MONOTONIC' => '0', 'TZ' => 'UTC', 'LD_PRELOAD' => "$faketime $so",
    ] + $env;
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => STDOUT, 2 => STDOUT], $pipes, null, $env);
    $rc = proc_close($p);
    unlink($clock);
    exit($rc);
}

if ($dir !== null) {
    foreach (['RateLimiter.php', 'Limit.php', 'Unlimited.php', 'ThrottleRequests.php'] as $file) {
        if (!is_file("$dir/$file")) {
            echo "not ok - laravel $version: the upstream files: $dir/$file is missing (see /work/shared/frameworks/SOURCES.txt)\n";
            exit(1);
        }
    }
}
// The bridge: through the Composer autoloader tests/run generates ($RL_VENDOR), else PSR-4 by
// hand (the PHP 8.4 root has no Composer). Laravel: the system's packages (/usr/share/php).
$vendor = getenv('RL_VENDOR');
if ($vendor !== false && is_file("$vendor/autoload.php")) {
    require "$vendor/autoload.php";
} else {
    spl_autoload_register(function (string $class): void {
        if (str_starts_with($class, 'RateLimit\\Bridge\\')) {
            $file = dirname(__DIR__) . '/src/' . str_replace('\\', '/', substr($class, 17)) . '.php';
            if (is_file($file)) {
                require $file;
            }
        }
    });
}
$autoloads = glob('/usr/share/php/Illuminate/{Cache,Filesystem,Container,Routing,Http,Support}/autoload.php', GLOB_BRACE);
if (count($autoloads) !== 6) {
    echo "not ok - laravel $version: the system's Laravel: want the autoload.php of Illuminate Cache, Filesystem, Container, Routing, Http, Support in /usr/share/php, found: " . implode(' ', $autoloads) . "\n";
    exit(1);
}
foreach ($autoloads as $autoload) {
    require_once $autoload;
}
if ($dir !== null) {
    if (!function_exists('Illuminate\Support\enum_value')) {
        // Laravel 11's helper (Illuminate/Support/functions.php), which the named limiters of
        // RateLimiter 11+ call; the system's illuminate/support predates it.
        require __DIR__ . '/fixtures/enum_value.php';
    }
    foreach (['RateLimiter.php', 'Limit.php', 'Unlimited.php', 'ThrottleRequests.php'] as $file) {
        require_once "$dir/$file";
    }
}

use Illuminate\Cache\FileStore;
use Illuminate\Cache\RateLimiter as StockRateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository;
use Illuminate\Filesystem\Filesystem;
use Illuminate\Http\Exceptions\HttpResponseException;
use Illuminate\Http\Exceptions\ThrottleRequestsException;
use Illuminate\Http\Request;
use Illuminate\Http\Response;
use Illuminate\Routing\Middleware\ThrottleRequests;
use Illuminate\Routing\Route;
use RateLimit\Bridge\Laravel\ExtensionRateLimiter;

$clockFile = (string) getenv('RL_PARITY_CLOCK');
$t0 = 1893456000;   // 2030-01-01 00:00:00 UTC
$now = $t0;
/** Moves the faked clock to $t0 + $s (never back: a clock stepping back mints nothing). */
$at = function (int $s) use (&$now, $t0, $clockFile): void {
    $now = max($now, $t0 + $s);
    // Written aside, then renamed over: libfaketime rereads the file at every clock read (of
    // any thread), and an empty file, between a truncation and its write, is an error to it.
    file_put_contents("$clockFile.new", gmdate('Y-m-d H:i:s', $now));
    rename("$clockFile.new", $clockFile);
    clearstatcache();
};

final class Failed extends Exception
{
}

/** A key no other test (nor an earlier run) uses. */
function fresh(string $name): string
{
    return $name . '-' . bin2hex(random_bytes(6));
}

function show(mixed $v): string
{
    return is_string($v) ? $v : json_encode($v);
}

// Each test: a sequence, given a fresh-limiter maker (a new limiter object is a new request)
// and a key, returning a trace; run for stock and bridge from the same instant, then compared.
// The stock limiter on a file cache, as a production cache counts: an entry is gone at its
// expiry second (FileStore, RedisStore, DatabaseStore; 8.83's ArrayStore keeps it one second
// more, which makes its windows a second longer than their decay).
$cacheDir = sys_get_temp_dir() . '/rl-parity-' . bin2hex(random_bytes(6));
register_shutdown_function(fn () => (new Filesystem())->deleteDirectory($cacheDir));
$stockMaker = function () use ($cacheDir): Closure {
    $cache = new Repository(new FileStore(new Filesystem(), $cacheDir . '/' . bin2hex(random_bytes(4))));
    return fn () => new StockRateLimiter($cache);
};
$bridgeMaker = fn (): Closure => fn () => new ExtensionRateLimiter(scope: 'parity');
$base = 0;
$compare = function (string $name, Closure $sequence, ?Closure $judge = null) use ($stockMaker, $bridgeMaker, $at, &$base): array {
    $base += 10000;   // each run starts on a clock no earlier run has used
    $at($base);
    $stock = $sequence($stockMaker(), fresh($name), fn (int $s) => $at($base + $s));
    $base += 10000;
    $at($base);
    $bridge = $sequence($bridgeMaker(), fresh($name), fn (int $s) => $at($base + $s));
    $s = implode(' ', array_map('show', $stock));
    $b = implode(' ', array_map('show', $bridge));
    if ($judge === null && $stock !== $bridge) {
        throw new Failed("stock [$s] vs bridge [$b]");
    }
    return [$s, $b, $stock, $bridge];
};

$laravel = match (true) {
    method_exists(StockRateLimiter::class, 'decrement') => 11,
    method_exists(StockRateLimiter::class, 'increment') => 10,
    default => 8,
};
$tests = [];

$tests['the bridge class loads on this RateLimiter'] = function () use ($laravel, $dir) {
    $file = (new ReflectionClass(StockRateLimiter::class))->getFileName();
    $limiter = new ExtensionRateLimiter();
    if (!$limiter instanceof StockRateLimiter) {
        throw new Failed('not a RateLimiter');
    }
    $methods = array_map(fn ($m) => $m->getName(), array_filter(
        (new ReflectionClass(StockRateLimiter::class))->getMethods(ReflectionMethod::IS_PUBLIC),
        fn ($m) => !$m->isConstructor(),
    ));
    return "Illuminate\\Cache\\RateLimiter from $file (API of " . ($laravel === 11 ? '11+' : $laravel) . '), ' . count($methods) . ' public methods: ' . implode(' ', $methods);
};

$tests['hit() past the limit counts on'] = function () use ($compare) {
    [$s, $b] = $compare('hit', function (Closure $make, string $key) {
        $l = $make();
        $out = [];
        for ($i = 0; $i < 8; $i++) {
            $out[] = $l->hit($key, 60);
        }
        return $out;
    });
    return "8 hits: stock $s, bridge $b";
};

$tests['attempts() are counted to the window\'s end, then 0'] = function () use ($compare) {
    [$s] = $compare('attempts', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [];
        foreach ([0, 30, 59, 60, 61] as $t) {
            $at($t);
            if ($t === 0 || $t === 30) {
                $l->hit($key, 60);
                $l->hit($key, 60);
            }
            $out[] = "t$t:" . $l->attempts($key);
        }
        return $out;
    });
    return "2 hits at t0 and t30, decay 60, attempts at t0 t30 t59 t60 t61: both $s";
};

$tests['availableIn() is the time to the window\'s end'] = function () use ($compare) {
    [$s] = $compare('availin', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [];
        $l->hit($key, 60);
        foreach ([0, 1, 59, 60] as $t) {
            $at($t);
            $out[] = "t$t:" . $l->availableIn($key);
        }
        $at(75);
        $l->hit($key, 60);
        $out[] = 't75 hit:' . $l->availableIn($key);
        return $out;
    });
    return "hit at t0 (decay 60), availableIn at t0 t1 t59 t60, a hit at t75: both $s";
};

$tests['a fresh request answers attempts() and availableIn() from the stored state'] = function () use ($compare) {
    [$s] = $compare('fresh', function (Closure $make, string $key, Closure $at) {
        $first = $make();
        for ($i = 0; $i < 5; $i++) {
            $first->hit($key, 100);
        }
        $at(10);
        $l = $make();   // the next request: a new limiter object, told nothing
        return [
            'attempts:' . $l->attempts($key), 'availableIn:' . $l->availableIn($key),
            'tooMany:' . var_export($l->tooManyAttempts($key, 5), true), 'remaining:' . $l->remaining($key, 5),
        ];
    });
    return "5 hits (decay 100), 10 s later in a new limiter object: both $s";
};

$tests['hit-then-compare admits exactly the limit'] = function () use ($compare) {
    [$s, $b, $stock, $bridge] = $compare('hitcmp', function (Closure $make, string $key) {
        $admitted = 0;
        for ($i = 0; $i < 10; $i++) {
            if ($make()->hit($key, 4) > 5) {
                continue;   // abort(429)
            }
            $admitted++;
        }
        return [$admitted];
    });
    if ($bridge !== [5]) {
        throw new Failed("bridge admitted $b");
    }
    return "10 requests of `if (hit(\$key, 4) > 5) abort(429)`: stock admitted $s, bridge $b";
};

$tests['attempt() runs at most maxAttempts callbacks, returns what stock returns'] = function () use ($compare) {
    [$s] = $compare('attempt', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $results = ['sent', null, false, 0, 'x', 'y', 'z'];
        $out = [];
        foreach ($results as $r) {
            $out[] = var_export($l->attempt($key, 5, fn () => $r, 30), true);
        }
        $out[] = 'attempts:' . $l->attempts($key);
        $at(30);
        $out[] = 't30:' . var_export($l->attempt($key, 5, fn () => 'again', 30), true);
        return $out;
    });
    return "callbacks returning 'sent' null false 0 'x' 'y' 'z' (max 5, decay 30), then at t30: both $s";
};

$tests['check, then hit (the middleware\'s way): tooManyAttempts, remaining, retriesLeft'] = function () use ($compare) {
    [$s] = $compare('check', function (Closure $make, string $key) {
        $out = [];
        for ($i = 0; $i < 7; $i++) {
            $l = $make();
            if ($l->tooManyAttempts($key, 5)) {
                $out[] = 'T' . $l->remaining($key, 5) . '/' . $l->retriesLeft($key, 5);
                continue;
            }
            $out[] = 'h' . $l->hit($key, 60) . 'r' . $l->remaining($key, 5);
        }
        return $out;
    });
    return "7 requests, max 5: both $s";
};

$tests['resetAttempts() forgets the count and keeps the timer, clear() forgets both'] = function () use ($compare) {
    [$s] = $compare('reset', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = ['none:' . var_export($l->resetAttempts($key), true)];
        for ($i = 0; $i < 3; $i++) {
            $l->hit($key, 60);
        }
        $at(10);
        $out[] = 'reset:' . var_export($make()->resetAttempts($key), true);
        $l = $make();
        $out[] = 'a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $l->hit($key, 60);
        $out[] = 'hit a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $l->clear($key);
        $out[] = 'clear a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        return $out;
    });
    return "3 hits, at t10 resetAttempts, a hit, clear: both $s";
};

$tests['increment() by an amount (Laravel 10 and later)'] = function () use ($compare, $laravel) {
    if ($laravel < 10) {
        $b = (new ExtensionRateLimiter(scope: 'parity'))->increment(fresh('inc8'), 60, 3);
        if ($b !== 3) {
            throw new Failed("bridge increment: $b");
        }
        return "RateLimiter 8 has no increment(); the bridge's: $b";
    }
    [$s] = $compare('inc', function (Closure $make, string $key) {
        $l = $make();
        return [$l->increment($key, 60, 3), $l->increment($key, 60, 4), $l->hit($key, 60), $l->attempts($key)];
    });
    return "increment 3, increment 4, hit, attempts: both $s";
};

$tests['a decay given as a DateInterval or a DateTime'] = function () use ($compare) {
    [$s] = $compare('interval', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [$l->hit($key, new DateInterval('PT90S')), 'in' . $l->availableIn($key)];
        $out[] = var_export($l->attempt($key . 'b', 2, fn () => 'ran', (new DateTimeImmutable())->modify('+45 seconds')), true);
        $out[] = 'in' . $l->availableIn($key . 'b');
        $at(45);
        $out[] = 't45 a' . $l->attempts($key) . ' b' . $l->attempts($key . 'b');
        return $out;
    });
    return "hit with PT90S, attempt() until now + 45 s: both $s";
};

$tests['the throttle middleware\'s headers, throttle:3,10'] = function () use ($compare) {
    [$s] = $compare('mw', fn (Closure $make, string $key, Closure $at) => throttle($make, $at, [3, 10, $key]));
    return "5 requests at t0, one at t200, one at t600: both $s";
};

$tests['the throttle middleware\'s headers, a named limit (Limit::perMinute(3))'] = function () use ($compare) {
    [$s] = $compare('named', function (Closure $make, string $key, Closure $at) {
        $named = function () use ($make, $key) {
            $l = $make();
            $l->for('api', fn (Request $r) => Limit::perMinute(3)->by($key));
            return $l;
        };
        return throttle($named, $at, ['api'], [0, 0, 0, 0, 0, 20, 60]);
    });
    return "5 requests at t0, one at t20, one at t60: both $s";
};

$tests['an attempt() whose callback throws charges nothing, and the exception goes on'] = function () use ($compare) {
    [$s] = $compare('throws', function (Closure $make, string $key, Closure $at) {
        $fail = function () {
            throw new RuntimeException('callback failed');
        };
        $l = $make();
        $l->hit($key, 60);
        $out = [];
        foreach ([$key, "$key-fresh"] as $k) {
            try {
                $l->attempt($k, 5, $fail, 60);
                $out[] = 'no exception';
            } catch (RuntimeException $e) {
                $out[] = 'threw a' . $l->attempts($k) . ' in' . $l->availableIn($k);
            }
        }
        $at(10);
        $l = $make();
        $out[] = 't10 ' . var_export($l->attempt("$key-fresh", 1, fn () => 'ran', 60), true)
            . ' a' . $l->attempts("$key-fresh") . ' in' . $l->availableIn("$key-fresh");
        return $out;
    });
    return "a hit, then attempt() whose callback throws; the same on a fresh key, and at t10 one that runs: both $s";
};

$tests['an attempt() whose callback throws after its window ended gives nothing to the next window'] = function () use ($compare) {
    [$s] = $compare('throwslate', function (Closure $make, string $key, Closure $at) {
        $out = [];
        $l = $make();
        try {
            // The callback outlives its window (decay 10): another request runs in the next one.
            $l->attempt($key, 1, function () use ($make, $key, $at, &$out) {
                $at(11);
                $out[] = 'B ' . var_export($make()->attempt($key, 1, fn () => 'ran', 10), true);
                throw new RuntimeException('callback failed');
            }, 10);
        } catch (RuntimeException $e) {
            $out[] = 'A threw';
        }
        $at(12);
        $out[] = 'C ' . var_export($make()->attempt($key, 1, fn () => 'ran', 10), true);
        return $out;
    });
    return "A's callback runs from t0 to t11 (decay 10, 1 attempt) and throws after B ran at t11; C at t12: both $s";
};

$tests['an attempt() whose callback throws leaves the timer of the attempts counted beside it'] = function () use ($compare) {
    [$s] = $compare('throwsbeside', function (Closure $make, string $key, Closure $at) {
        $out = [];
        $l = $make();
        try {
            // B is counted while A's callback runs; A throws.
            $l->attempt($key, 2, function () use ($make, $key, &$out) {
                $out[] = 'B ' . var_export($make()->attempt($key, 2, fn () => 'ran', 10), true);
                throw new RuntimeException('callback failed');
            }, 10);
        } catch (RuntimeException $e) {
            $out[] = 'A threw';
        }
        $at(1);
        $out[] = 'C ' . var_export($make()->attempt($key, 2, fn () => 'ran', 10), true);
        $at(2);
        $out[] = 'D ' . var_export($make()->attempt($key, 2, fn () => 'ran', 10), true);
        return $out;
    });
    return "2 attempts per 10 s: A's callback throws after B ran, C at t1, D at t2: both $s";
};

$tests['decrement() lowers the count in its window (Laravel 11 and later)'] = function () use ($compare, $laravel) {
    if ($laravel < 11) {
        return "RateLimiter $laravel has no decrement()";
    }
    [$s] = $compare('decr', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [$l->hit($key, 60), $l->hit($key, 60), $l->hit($key, 60)];
        $at(10);
        $out[] = 'd' . $l->decrement($key, 60);
        $at(20);
        $out[] = 'd' . $l->decrement($key, 60, 2);
        $out[] = 'a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $at(30);
        $out[] = 'h' . $l->hit($key, 60) . ' in' . $l->availableIn($key);
        $at(61);
        $l = $make();
        $out[] = 't61 a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $at(90);
        $out[] = 't90 a' . $l->attempts($key);
        return $out;
    });
    return "3 hits at t0 (decay 60), decrement at t10, decrement by 2 at t20, a hit at t30, reads at t61 and t90: both $s";
};

$tests['resetAttempts() of a count given back to 0 (Laravel 10 and later)'] = function () use ($compare, $laravel) {
    if ($laravel < 10) {
        return 'RateLimiter 8 has no increment()';
    }
    [$s, $b] = $compare('resetback', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [$l->hit($key, 60), $l->increment($key, 60, -1)];
        $at(5);
        $out[] = 'r' . var_export($l->resetAttempts($key), true) . ' a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $out[] = $l->hit($key, 60);
        $out[] = $l->increment($key, 60, -1);
        $l->clear($key);
        $out[] = 'c a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        $out[] = 'r' . var_export($make()->resetAttempts($key), true);
        return $out;
    });
    // Stock forgets a counter entry holding 0 (true), and so does the bridge while the window runs.
    return "a hit given back, resetAttempts() at t5, a hit given back, clear(): both $s";
};

$tests['increment() by an amount below 1 (Laravel 10 and later)'] = function () use ($compare, $laravel) {
    if ($laravel < 10) {
        return 'RateLimiter 8 has no increment()';
    }
    [$s] = $compare('incneg', function (Closure $make, string $key) {
        $l = $make();
        return [$l->increment($key, 60, 4), $l->increment($key, 60, -3), $l->increment($key, 60, 0), $l->hit($key, 60)];
    });
    return "increment by 4, by -3, by 0, a hit: both $s";
};

$tests['a count below 0 (known difference)'] = function () use ($compare, $laravel) {
    if ($laravel < 11) {
        return "RateLimiter $laravel has no decrement()";
    }
    [$s, $b] = $compare('below0', function (Closure $make, string $key) {
        $l = $make();
        return [$l->decrement($key, 60), $l->hit($key, 60), $l->attempts($key)];
    }, judge: fn () => true);
    $want = '0 1 1';
    if ($b !== $want) {
        throw new Failed("bridge [$b], want [$want]");
    }
    return "decrement of a fresh key, a hit, attempts: stock $s; bridge $b (a count never goes below 0 in the store)";
};

$tests['remaining() and retriesLeft() past the limit: what this version\'s stock answers'] = function () use ($compare) {
    [$s] = $compare('pastlimit', function (Closure $make, string $key) {
        $l = $make();
        for ($i = 0; $i < 7; $i++) {
            $l->hit($key, 60);
        }
        $l = $make();
        return ['r' . $l->remaining($key, 5), 'l' . $l->retriesLeft($key, 5)];
    });
    return "7 hits, max 5: both $s";
};

$tests['increment() by an amount after tooManyAttempts() answered false returns the count (no other worker)'] = function () use ($compare, $laravel) {
    if ($laravel < 10) {
        return 'RateLimiter 8 has no increment()';
    }
    [$s] = $compare('incafter', function (Closure $make, string $key) {
        $l = $make();
        $out = ['tooMany:' . var_export($l->tooManyAttempts($key, 2), true)];
        try {
            $out[] = 'i' . $l->increment($key, 60, 3);
        } catch (Throwable $e) {
            $out[] = get_class($e);
        }
        return $out;
    });
    return "tooManyAttempts(max 2), increment by 3: both $s";
};

$tests['resetAttempts() of a window that has ended answers false'] = function () use ($compare) {
    [$s] = $compare('resetended', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $l->hit($key, 5);
        $at(10);
        $l = $make();
        return ['a' . $l->attempts($key), 'reset:' . var_export($l->resetAttempts($key), true)];
    });
    return "a hit (decay 5), 10 s later attempts and resetAttempts: both $s";
};

$tests['a fresh request counts a window that outlives its timer (resetAttempts, then a hit)'] = function () use ($compare) {
    [$s] = $compare('outlive', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $l->hit($key, 10);
        $at(5);
        $make()->resetAttempts($key);
        $at(6);
        $make()->hit($key, 10);
        $at(12);
        $l = $make();
        return ['a' . $l->attempts($key), 'r' . $l->remaining($key, 5), 'in' . $l->availableIn($key)];
    });
    return "hit at t0 (decay 10), resetAttempts at t5, hit at t6, a new request at t12: both $s";
};

$tests['one key hit with two decays: each window lasts the decay it was started with'] = function () use ($compare) {
    [$s] = $compare('twodecays', function (Closure $make, string $key, Closure $at) {
        $l = $make();
        $out = [$l->hit($key, 5)];
        $at(2);
        $out[] = $l->hit($key, 10) . ' in' . $l->availableIn($key);
        $at(7);
        $out[] = $l->hit($key, 10) . ' in' . $l->availableIn($key);
        $at(12);
        $out[] = 'a' . $l->attempts($key) . ' ' . $l->hit($key, 5) . ' in' . $l->availableIn($key);
        $at(17);
        $l = $make();
        $out[] = 't17 a' . $l->attempts($key) . ' in' . $l->availableIn($key);
        return $out;
    });
    return "hit (decay 5) at t0, hit (decay 10) at t2 and t7, hit (decay 5) at t12, a new request at t17: both $s";
};

$tests['a decay of 0 seconds counts nothing, as stock\'s cache stores nothing for it'] = function () use ($compare) {
    [$s] = $compare('decay0', function (Closure $make, string $key) {
        $l = $make();
        return [$l->hit($key, 0), $l->hit($key, 0), 'a' . $l->attempts($key), 'in' . $l->availableIn($key)];
    });
    return "two hits with decay 0, attempts, availableIn: both $s";
};

/**
 * Requests through the stock ThrottleRequests middleware of this version; per request the
 * status and the X-RateLimit-* / Retry-After headers.
 *
 * @param list<int> $times the clock of each request
 */
function throttle(Closure $make, Closure $at, array $args, array $times = [0, 0, 0, 0, 0, 200, 600]): array
{
    $out = [];
    foreach ($times as $t) {
        $at($t);
        $mw = new ThrottleRequests($make());
        $request = Request::create('/x', 'GET', [], [], [], ['REMOTE_ADDR' => '203.0.113.9']);
        $request->setRouteResolver(fn () => new Route('GET', '/x', []));
        try {
            $r = $mw->handle($request, fn () => new Response('ok'), ...$args);
            $h = $r->headers;
            $code = $r->getStatusCode();
            $headers = [$h->get('X-RateLimit-Limit'), $h->get('X-RateLimit-Remaining'), $h->get('Retry-After'), $h->get('X-RateLimit-Reset')];
        } catch (ThrottleRequestsException | HttpResponseException $e) {
            $code = 429;
            $h = $e instanceof ThrottleRequestsException ? $e->getHeaders() : $e->getResponse()->headers->all();
            $headers = [$h['X-RateLimit-Limit'] ?? null, $h['X-RateLimit-Remaining'] ?? null, $h['Retry-After'] ?? null, $h['X-RateLimit-Reset'] ?? null];
        }
        $reset = $headers[3] === null ? '' : ' reset+' . ((int) $headers[3] - time());
        $out[] = "t$t:$code(" . implode(',', array_map(fn ($v) => $v ?? '-', array_slice($headers, 0, 3))) . "$reset)";
    }
    return $out;
}

$failed = 0;
foreach ($tests as $name => $fn) {
    try {
        echo "ok - laravel $version: $name: " . $fn() . "\n";
    } catch (Throwable $e) {
        $failed++;
        $where = $e instanceof Failed ? '' : ' (' . get_class($e) . ' at ' . basename($e->getFile()) . ':' . $e->getLine() . ')';
        echo "not ok - laravel $version: $name: " . $e->getMessage() . "$where\n";
    }
}
exit($failed === 0 ? 0 : 1);
