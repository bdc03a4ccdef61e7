<?php
// The phpredis + Lua peer of bench/redis (bench/redis/lib.php) behind the same query as
// limit.php: ?s=subject&limit=N&per=SECONDS, one decision per request on a kept (pconnect)
// connection without phpredis's ECHO per reuse. 200 when admitted, 429 when not. The pool's
// env (bench/e2e/run --redis): BENCH_REDIS_LIB, BENCH_REDIS_PORT, BENCH_KEY (hex).
declare(strict_types=1);
require getenv('BENCH_REDIS_LIB');
ini_set('redis.pconnect.echo_check_liveness', '0');
$peer = redis_peer('peer', ['limit' => (int) ($_GET['limit'] ?? 5), 'per' => (float) ($_GET['per'] ?? 86400),
    'key' => hex2bin(getenv('BENCH_KEY')), 'cluster' => false, 'port' => (int) getenv('BENCH_REDIS_PORT'),
    'persistent' => true]);
if ($peer->acquire($_GET['s'] ?? 'demo')) {
    echo "ok\n";
} else {
    http_response_code(429);
    echo "Too Many Requests\n";
}
