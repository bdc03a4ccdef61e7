<?php
// One rate-limited request: /peer.php?p=NAME. The peer is built per request, as an application
// would (PDO peers with a persistent connection); the subject is the client address, so wrk
// hammers one subject. 200 when admitted, 429 when not.
declare(strict_types=1);

$c = require getenv('BENCH_CONFIG');  // bench/run writes it (env of the pool): bench, state, limit, per, key
$name = $_GET['p'] ?? '';
if (!in_array($name, ['pdo-delete', 'pdo-wal', 'symfony', 'apcu', 'static', 'ratelimit'], true)) {
    http_response_code(404);
    exit;
}
$factory = require $c['bench'] . "/peers/$name.php";
$peer = $factory(['limit' => $c['limit'], 'per' => $c['per'], 'dir' => $c['state'] . "/$name",
    'key' => $c['key'], 'persistent' => true]);
if ($peer->acquire($_SERVER['REMOTE_ADDR'])) {
    echo "ok\n";
} else {
    http_response_code(429);
    echo "too many requests\n";
}
