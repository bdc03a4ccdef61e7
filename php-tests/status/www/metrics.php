<?php
// A Prometheus scrape endpoint: the README's example, verbatim. Serve it only to the scraper
// (e.g. nginx: location = /metrics.php { allow 10.0.0.5; deny all; ... }).
try {
    $text = ratelimit_metrics();
} catch (RateLimit\Exception $e) {
    http_response_code(503);
    exit;
}
header('Content-Type: text/plain; version=0.0.4; charset=utf-8');
echo $text;
