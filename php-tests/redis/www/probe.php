<?php
// ?s=subject[&scope=S]: can an in-flight slot (inflight: 1) be had right now? Takes it and gives it back.
require __DIR__ . '/_common.inc';
$d = rt_decide(fn () => ratelimit_acquire($_GET['s'] ?? 'hold', limit: 1000000, per: 1, inflight: 1,
    scope: $_GET['scope'] ?? 'default'));
if ($d->allowed && $d->lease !== null) {
    ratelimit_release($d);
}
http_response_code($d->allowed ? 200 : 429);
