--TEST--
ratelimit_acquire_all(): headers() lists every policy as structured-field lists, one member per scope in the order given; Retry-After only on a denial, the longest wait of the denying limits
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$limits = [
    ['limit' => 5, 'per' => 1, 'scope' => 'api-second'],
    ['limit' => 1000, 'per' => 86400, 'scope' => 'api-day'],
    ['limit' => 1, 'per' => 60, 'scope' => 'api-minute'],
];
foreach (ratelimit_acquire_all('k', $limits)->headers() as $name => $value) {
    echo "$name: $value\n";
}
echo "-- denied by the minute limit\n";
foreach (ratelimit_acquire_all('k', $limits)->headers() as $name => $value) {
    echo "$name: $value\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('compound_headers');
?>
--EXPECTF--
RateLimit-Policy: "api-second";q=5;w=1, "api-day";q=1000;w=86400, "api-minute";q=1;w=60
RateLimit: "api-second";r=4;t=1, "api-day";r=999;t=87, "api-minute";r=0;t=60
-- denied by the minute limit
RateLimit-Policy: "api-second";q=5;w=1, "api-day";q=1000;w=86400, "api-minute";q=1;w=60
RateLimit: "api-second";r=4;t=1, "api-day";r=999;t=87, "api-minute";r=0;t=60
Retry-After: 60
