<?php
// ratelimit_stats() as JSON.
require __DIR__ . '/_common.inc';
echo json_encode(ratelimit_stats()), "\n";
