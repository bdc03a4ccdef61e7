--TEST--
$request_id: a retry with the same id but other terms (another cost, limit, per, inflight, scopes, or the other function) is charged like any call, never free and never an error (the id is the client's); admitted, it replaces what was remembered
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

function left(): int { return ratelimit_peek('m', 1000, 3600, 'api')->remaining; }
function take(callable $call, string $what): void {
    $before = left();
    try {
        $d = $call();
        echo "$what: reason=$d->reason replay=", var_export($d->replay, true), " charged=", $before - left(), "\n";
    } catch (Throwable $e) {
        echo "$what: ", get_class($e), ": ", $e->getMessage(), "\n";
    }
}
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 1, 'K'), 'first');
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 1, 'K'), 'same terms');
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 100, 'K'), 'cost 100');
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 100, 'K'), 'cost 100 again');
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 1, 'K'), 'cost 1 again');
take(fn() => ratelimit_acquire('m', 999, 3600, 0, 'api', 1, 'K'), 'limit 999');
take(fn() => ratelimit_acquire('m', 1000, 60, 0, 'api', 1, 'K'), 'per 60');
take(fn() => ratelimit_acquire('m', 1000, 3600, 2, 'api', 1, 'K'), 'inflight 2');
take(fn() => ratelimit_acquire_all('m', [['limit' => 1000, 'per' => 3600, 'scope' => 'api']], 1, 0, 'K'), 'acquire_all');
take(fn() => ratelimit_acquire_all('m', [['limit' => 1000, 'per' => 3600, 'scope' => 'api']], 1, 0, 'K'), 'acquire_all again');
take(fn() => ratelimit_acquire_all('m', [['limit' => 1000, 'per' => 3600, 'scope' => 'api'], ['limit' => 5, 'per' => 60, 'scope' => 'api-min']], 1, 0, 'K'), 'acquire_all, other scopes');
take(fn() => ratelimit_acquire('m', 1000, 3600, 0, 'api', 1, 'K'), 'acquire again');
$s = ratelimit_stats();
echo "allowed={$s['allowed']} retries={$s['retries']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_mismatch');
?>
--EXPECT--
first: reason=ok replay=false charged=1
same terms: reason=ok replay=true charged=0
cost 100: reason=ok replay=false charged=100
cost 100 again: reason=ok replay=true charged=0
cost 1 again: reason=ok replay=false charged=1
limit 999: reason=ok replay=false charged=1
per 60: reason=ok replay=false charged=1
inflight 2: reason=ok replay=false charged=1
acquire_all: reason=ok replay=false charged=1
acquire_all again: reason=ok replay=true charged=0
acquire_all, other scopes: reason=ok replay=false charged=1
acquire again: reason=ok replay=false charged=1
allowed=9 retries=3
