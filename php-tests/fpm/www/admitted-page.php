<?php
// What limit.php answers an admitted client, without the limiter: the same query string, headers,
// status and body, fixed. bench/e2e/run measures it to tell the page's cost from the limiter's.
header('X-Worker-Pid: ' . getmypid());
$subject = $_GET['s'] ?? 'demo';
$limit = (int)($_GET['limit'] ?? 5);
$per = (float)($_GET['per'] ?? 86400);
header('X-RateLimit-Reason: ok');
$headers = [
    'RateLimit-Policy' => "\"default\";q=$limit;w=" . (int)$per,
    'RateLimit' => '"default";r=' . ($limit - 1) . ';t=' . (int)$per,
];
foreach ($headers as $name => $value) {
    header("$name: $value");
}
http_response_code(200);
echo "ok\n";
