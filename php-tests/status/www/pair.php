<?php
// ratelimit_metrics(), ratelimit_stats() and ratelimit_top() of one moment, from one worker.
header('Content-Type: application/json');
echo json_encode(['metrics' => ratelimit_metrics(), 'stats' => ratelimit_stats(),
                  'top' => ratelimit_top(1000)]), "\n";
