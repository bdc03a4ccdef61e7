<?php
// One process, N plain ratelimit_acquire() calls (no request id), one subject whose limit is
// never reached: prints "median_us p99_us" of the per-call times. Used by bench/retries/run.
// argv: N [request_id mode: none|same|fresh]
$n = (int)($argv[1] ?? 20000);
$mode = $argv[2] ?? 'none';
for ($i = 0; $i < 500; $i++) ratelimit_acquire('bench-warm', 1000000000000, 1);
$t = [];
for ($i = 0; $i < $n; $i++) {
    $id = match ($mode) { 'same' => 'job-1', 'fresh' => "job-$i", default => null };
    $s = hrtime(true);
    if ($id === null) {
        ratelimit_acquire('bench', 1000000000000, 1);
    } else {
        ratelimit_acquire('bench', 1000000000000, 1, request_id: $id);
    }
    $t[] = hrtime(true) - $s;
}
sort($t);
printf("%.2f %.2f\n", $t[intdiv($n, 2)] / 1000, $t[(int)floor($n * 0.99)] / 1000);
