<?php
// /peer.php?p=floor|peer: one decision per request with a kept (pconnect) phpredis connection,
// the subject the client address (so wrk hammers one subject). 200 when admitted, 429 when not.
// The pool's env (bench/redis/run): BENCH_REDIS_LIB, BENCH_REDIS_PORT, BENCH_KEY (hex),
// BENCH_LIMIT, BENCH_PER. ?echo=1 keeps phpredis's default ECHO liveness check per reused
// connection (a second round trip per request); without it the check is off, as a careful
// developer would have it (redis.pconnect.echo_check_liveness=0).
declare(strict_types=1);
require getenv('BENCH_REDIS_LIB');
ini_set('redis.pconnect.echo_check_liveness', empty($_GET['echo']) ? '0' : '1');
$name = $_GET['p'] ?? '';
if ($name !== 'floor' && $name !== 'peer') {
    http_response_code(404);
    exit;
}
$peer = redis_peer($name, ['limit' => (int) getenv('BENCH_LIMIT'), 'per' => (float) getenv('BENCH_PER'),
    'key' => hex2bin(getenv('BENCH_KEY')), 'cluster' => false, 'port' => (int) getenv('BENCH_REDIS_PORT'),
    'persistent' => true]);
if ($peer->acquire($_SERVER['REMOTE_ADDR'] ?? '127.0.0.1')) {
    echo "ok\n";
} else {
    http_response_code(429);
    echo "too many requests\n";
}
