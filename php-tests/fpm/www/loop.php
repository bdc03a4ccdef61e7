<?php
// ?n=10000: n decisions in one request over 8 subjects (every 4th with a lease, released at
// once), to watch the worker's memory. Prints JSON counts of the reasons.
header('X-Worker-Pid: ' . getmypid());
$n = (int)($_GET['n'] ?? 10000);
$reasons = [];
for ($i = 0; $i < $n; $i++) {
    $s = 'loop-' . ($i % 8);
    $d = $i % 4 == 0
        ? ratelimit_acquire($s, limit: 1000, per: 1, inflight: 4)
        : ratelimit_acquire($s, limit: 1000, per: 1);
    $reasons[$d->reason] = ($reasons[$d->reason] ?? 0) + 1;
    if ($d->lease !== null) {
        ratelimit_release($d);
    }
}
header('X-RateLimit-Reason: ' . implode(',', array_keys($reasons)));
echo json_encode($reasons), "\n";
