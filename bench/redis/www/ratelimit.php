<?php
// One ratelimit_acquire() per request, ratelimit.backend=redis (the pool's php_admin_value
// lines, bench/redis/run); the subject the client address. X-Backend and X-Source say what
// decided, so the run can refuse to report a figure that Redis did not make.
declare(strict_types=1);
$st = ratelimit_stats();
header('X-Backend: ' . ($st['backend'] ?? 'none'));
$d = ratelimit_acquire($_SERVER['REMOTE_ADDR'] ?? '127.0.0.1', limit: (int) getenv('BENCH_LIMIT'),
    per: (float) getenv('BENCH_PER'));
header('X-Source: ' . ($d->source ?? 'none'));
if ($d->allowed) {
    echo "ok\n";
} else {
    http_response_code(429);
    echo "too many requests\n";
}
