<?php
// One ratelimit_acquire() per request, ratelimit.backend=redis (the pool's php_admin_value
// lines, bench/redis/run); the subject the client address. X-Source says what decided; with
// ?check=1 X-Backend gives ratelimit_stats()['backend'] too (only then: in Redis mode
// ratelimit_stats() reads the site-wide counters from Redis, which is no part of a decision).
declare(strict_types=1);
if (isset($_GET['check'])) {
    header('X-Backend: ' . (ratelimit_stats()['backend'] ?? 'none'));
}
$d = ratelimit_acquire($_SERVER['REMOTE_ADDR'] ?? '127.0.0.1', limit: (int) getenv('BENCH_LIMIT'),
    per: (float) getenv('BENCH_PER'));
header('X-Source: ' . ($d->source ?? 'none'));
if ($d->allowed) {
    echo "ok\n";
} else {
    http_response_code(429);
    echo "too many requests\n";
}
