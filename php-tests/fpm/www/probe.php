<?php
// ?s=subject: can an in-flight slot (inflight: 1) be had right now? Takes it and gives it back.
header('X-Worker-Pid: ' . getmypid());
$d = ratelimit_acquire($_GET['s'] ?? 'hold', limit: 1000000, per: 1, inflight: 1);
header('X-RateLimit-Reason: ' . $d->reason);
if ($d->allowed) {
    ratelimit_release($d);
}
http_response_code($d->allowed ? 200 : 429);
