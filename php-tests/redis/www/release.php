<?php
// ?lease=TOKEN: ratelimit_release() of a lease token (from any host). X-Released: 1 or 0.
require __DIR__ . '/_common.inc';
try {
    $r = ratelimit_release((string) ($_GET['lease'] ?? ''));
} catch (RateLimit\Exception $e) {
    header('X-Error: ' . preg_replace('/\s+/', ' ', $e->getMessage()));
    http_response_code(500);
    exit;
}
header('X-Released: ' . ($r ? 1 : 0));
echo $r ? "released\n" : "nothing to release\n";
