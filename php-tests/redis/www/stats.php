<?php
// ratelimit_stats() as JSON; a RateLimit\Exception as {"error": message}, answered, not logged,
// so that the hosts' PHP error logs hold only what the extension writes there.
require __DIR__ . '/_common.inc';
try {
    echo json_encode(ratelimit_stats()), "\n";
} catch (RateLimit\Exception $e) {
    http_response_code(500);
    echo json_encode(['error' => $e->getMessage()]), "\n";
}
