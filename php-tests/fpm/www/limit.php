<?php
// One rate decision per request: ?s=subject&limit=5&per=86400 (&policy=fixed_window, default
// token_bucket; &amount=N a stepped_bucket's tokens per step; &ms=N sleeps N ms afterwards,
// which spreads concurrent requests over the workers). 200 when admitted, 429 when not.
header('X-Worker-Pid: ' . getmypid());
$d = ratelimit_acquire($_GET['s'] ?? 'demo', limit: (int)($_GET['limit'] ?? 5),
                       per: (float)($_GET['per'] ?? 86400),
                       policy: $_GET['policy'] ?? 'token_bucket',
                       amount: isset($_GET['amount']) ? (int)$_GET['amount'] : null);
header('X-RateLimit-Reason: ' . $d->reason);
foreach ($d->headers() as $name => $value) {
    header("$name: $value");
}
if (isset($_GET['ms'])) {
    usleep(1000 * (int)$_GET['ms']);
}
http_response_code($d->allowed ? 200 : 429);
echo $d->allowed ? "ok\n" : "Too Many Requests\n";
