<?php
// One decision (?s=subject&limit=N&per=seconds). Answers 200 "ok remaining=N" or 429; a
// RateLimit\Exception is answered 503 with its class and message as the body, so that the
// test sees what the pool refused and why.
header('X-Worker-Pid: ' . getmypid());
try {
    $d = ratelimit_acquire($_GET['s'] ?? 'trust', limit: (int)($_GET['limit'] ?? 1000),
                           per: (float)($_GET['per'] ?? 86400));
    header('X-RateLimit-Reason: ' . $d->reason);
    http_response_code($d->allowed ? 200 : 429);
    echo $d->allowed ? "ok remaining=$d->remaining\n" : "denied ($d->reason)\n";
} catch (RateLimit\Exception $e) {
    header('X-RateLimit-Reason: exception');
    http_response_code(503);
    echo get_class($e), ': ', $e->getMessage(), "\n";
}
