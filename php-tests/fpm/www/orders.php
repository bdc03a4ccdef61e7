<?php
// The request-id example of docs/usage.md, run as it is written: the block between the
// README markers is that page's, with `limit: 10, per: 60` as `limit: 3, per: 86400` (so that
// no token comes back during the test); php-tests/fpm/run test 12 checks that they agree.
// ?u=subject&work_ms=N. The work, place_order(), is recorded in $RL_TMP/orders-<md5(u)>.json
// under flock: how many times it ran ("runs") and the most that ran at once ("max").
header('X-Worker-Pid: ' . getmypid());
$user = $_GET['u'] ?? 'orders';

function place_order(string $user): void
{
    $file = getenv('RL_TMP') . '/orders-' . md5($user);
    $lock = fopen("$file.lock", 'c');
    $update = function (int $delta) use ($lock, $file): void {
        flock($lock, LOCK_EX);
        $s = is_file("$file.json") ? json_decode(file_get_contents("$file.json"), true)
            : ['runs' => 0, 'now' => 0, 'max' => 0];
        $s['runs'] += $delta > 0 ? 1 : 0;
        $s['now'] += $delta;
        $s['max'] = max($s['max'], $s['now']);
        file_put_contents("$file.json", json_encode($s));
        flock($lock, LOCK_UN);
    };
    $update(1);
    usleep(1000 * (int)($_GET['work_ms'] ?? 1500));
    $update(-1);
    header('X-Placed: 1');
    echo "placed\n";
}

// README begin
$d = ratelimit_acquire($user, limit: 3, per: 86400, inflight: 1, scope: 'orders',
                       request_id: $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? null);
foreach ($d->headers() as $name => $value) {
    header("$name: $value");
}
if ($d->replay) {
    // Admitted before under this key: do not place the order again. Answer what the first
    // attempt answered (your idempotency store has it), or that it was accepted.
    http_response_code(200);
    echo "already accepted\n";
    exit;
}
if (!$d->allowed) {
    // "in_progress": the first attempt with this key still runs (Retry-After: until its
    // lease ends); "rate" or "inflight": the limit.
    http_response_code($d->reason === 'in_progress' ? 409 : 429);
    exit;
}
try {
    place_order($user);
} finally {
    ratelimit_release($d);
}
// README end
