<?php
// On the main thread, after every thread of the classic and worker phases ended (each with
// ts_free_thread()): the host-wide totals and the shared buckets' denials are exact, so each
// thread's worker wrote what it held back when its thread ended, and no lease outlived its
// request. (php-tests/zts/harness.c)
$p = harness_plan();
$classic = $p['classic_threads'] * $p['classic_requests'];
$worker = $p['worker_threads'] * $p['worker_requests'];
$want = [
    // the own subject of every request but each thread's last, plus the shared subjects'
    // limits (100 and 50)
    'allowed' => ($classic - $p['classic_threads']) + 100 + ($worker - $p['worker_threads']) + 50,
    // the rest of the shared calls: 4 per classic request, 2 per logical request
    'denied_rate' => ($classic * 4 - 100) + ($worker * 2 - 50),
    'denied_inflight' => 0,
    'unavailable' => 0,
    'storage_errors' => 0,
    'reopened' => 0,
    'live_leases' => 0,
];
$s = ratelimit_stats();
foreach ($want as $k => $v) {
    echo "check: $k {$s[$k]} (want $v)\n";
    if ($s[$k] !== $v) {
        harness_fail("$k is {$s[$k]}, want $v");
    }
}
// Per bucket too (written apart from the totals): the two shared buckets' denials.
$denied = array_column(ratelimit_top(10), 'denied');
$wantDenied = [$worker * 2 - 50, $classic * 4 - 100];
echo "check: the buckets' denials ", json_encode($denied), " (want ", json_encode($wantDenied), ")\n";
if ($denied !== $wantDenied) {
    harness_fail("the buckets' denials are " . json_encode($denied));
}
// The unfreed threads come next: one request each, without a lease, calling their shared
// subject (limit 5) 10 times each. What they hold back is written at module shutdown;
// scripts/zts reads the totals then (final.php).
$final = $want;
$final['allowed'] += 5;
$final['denied_rate'] += $p['unfreed_threads'] * 10 - 5;
file_put_contents(dirname(ini_get('ratelimit.db_path')) . '/expected-final.json', json_encode($final));
