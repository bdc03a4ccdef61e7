<?php
// ?s=subject&n=200&limit=..&per=..: n decisions in one request, each timed with hrtime. Prints
// JSON: median_us, p90_us, max_us, and the counts of reasons and sources.
require __DIR__ . '/_common.inc';
$n = (int) ($_GET['n'] ?? 200);
$lat = [];
$reasons = $sources = [];
for ($i = 0; $i < $n; $i++) {
    $t0 = hrtime(true);
    $d = ratelimit_acquire(($_GET['s'] ?? 'loop') . '-' . ($i % 8), limit: (int) ($_GET['limit'] ?? 1000000),
        per: (float) ($_GET['per'] ?? 1));
    $lat[] = intdiv(hrtime(true) - $t0, 1000);
    $reasons[$d->reason] = ($reasons[$d->reason] ?? 0) + 1;
    $src = $d->source ?? 'none';
    $sources[$src] = ($sources[$src] ?? 0) + 1;
}
sort($lat);
$q = fn (float $p) => $lat[max(0, (int) ceil($p * $n) - 1)];
echo json_encode(['median_us' => $q(0.5), 'p90_us' => $q(0.9), 'max_us' => $lat[$n - 1],
    'reasons' => $reasons, 'sources' => $sources]), "\n";
