<?php
// What limit.php answers a denied client, without the limiter: the same query string, headers,
// status and body, fixed. bench/e2e/run measures it to tell the page's cost from the limiter's.
header('X-Worker-Pid: ' . getmypid());
$subject = $_GET['s'] ?? 'demo';
$limit = (int)($_GET['limit'] ?? 5);
$per = (float)($_GET['per'] ?? 86400);
header('X-RateLimit-Reason: rate');
$headers = [
    'RateLimit-Policy' => "\"default\";q=$limit;w=" . (int)$per,
    'RateLimit' => '"default";r=0;t=86381',
    'Retry-After' => '86381',
];
foreach ($headers as $name => $value) {
    header("$name: $value");
}
http_response_code(429);
echo "Too Many Requests\n";
