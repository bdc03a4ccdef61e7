<?php
// A Prometheus scrape endpoint (docs/operations.md, "Metrics"): serve it to the scraper only.
try {
    $text = ratelimit_metrics();
} catch (RateLimit\Exception $e) {
    http_response_code(503);
    exit;
}
header('Content-Type: text/plain; version=0.0.4; charset=utf-8');
echo $text;
