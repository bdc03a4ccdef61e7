<?php
// One decision: ?s=subject&limit=N&per=S&inflight=N&ms=N (holds the lease N ms). 200 or 429.
header('X-Worker-Pid: ' . getmypid());
$d = ratelimit_acquire($_GET['s'] ?? 'status', limit: (int)($_GET['limit'] ?? 5),
                       per: (float)($_GET['per'] ?? 3600),
                       inflight: isset($_GET['inflight']) ? (int)$_GET['inflight'] : null);
header('X-RateLimit-Reason: ' . $d->reason);
if ($d->allowed && isset($_GET['ms'])) {
    usleep(1000 * (int)$_GET['ms']);
}
http_response_code($d->allowed ? 200 : 429);
