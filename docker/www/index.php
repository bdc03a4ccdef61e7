<?php
// Example front controller: 5 requests per minute per client IP, shared by all FPM workers.
$d = ratelimit_acquire($_SERVER['REMOTE_ADDR'], limit: 5, per: 60);
foreach ($d->headers() as $name => $value) {
    header("$name: $value");
}
if (!$d->allowed) {
    http_response_code(429);
    echo "Too Many Requests\n";
    exit;
}
echo 'Hello from worker ', getmypid(), ' on ', gethostname(), ", $d->remaining left\n";
