<?php
// One process: N decisions round-robin over S subjects, each call timed with hrtime.
// Usage: php single.php JSON  with peer, n, subjects, limit, per, key (hex), cluster, port | seeds, out
declare(strict_types=1);
require __DIR__ . '/lib.php';

$c = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
$c['key'] = hex2bin($c['key']);
$n = $c['n'];
$subjects = $c['subjects'];
$peer = redis_peer($c['peer'], $c);
// The warm-up also fills the script cache.
[$lat, $admitted, $errors, $lastError, $elapsed] = bench_timed_calls($peer, $subjects, $n, warm: 200, warmSubjects: 8);
$errors += $peer->unavailable ?? 0;
sort($lat);
// The most the policy admits: each subject's calls, capped by limit + refill over the run.
$allows = 0;
if ($c['peer'] !== 'floor') {
    for ($i = 0; $i < $subjects; $i++) {
        $calls = intdiv($n - $i + $subjects - 1, $subjects);
        $allows += min($calls, (int) floor($c['limit'] + $c['limit'] * ($elapsed + 0.002) / $c['per']));
    }
}
$r = ['peer' => $c['peer'], 'topology' => $c['cluster'] ? 'cluster' : 'single', 'n' => $n,
    'median' => q_sorted($lat, 0.5), 'p99' => q_sorted($lat, 0.99), 'p999' => q_sorted($lat, 0.999),
    'max' => $lat[$n - 1], 'per_s' => $n / $elapsed, 'admitted' => $admitted, 'allows' => $allows,
    'errors' => $errors, 'last_error' => $lastError, 'sources' => $peer->sources ?? null];
file_put_contents($c['out'], json_encode($r, JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR) . "\n");
printf("  %-9s %-7s median %6.1f us  p99 %6.1f us  p99.9 %7.1f us  %s%s\n", $c['peer'], $r['topology'],
    $r['median'] / 1e3, $r['p99'] / 1e3, $r['p999'] / 1e3,
    $c['peer'] === 'floor' ? "returned 1: $admitted/$n" : "admitted $admitted/$allows",
    $errors ? "  errors $errors ($lastError)" : '');
// A peer that errs or a floor that did not answer 1 is not a measurement.
exit($errors || ($c['peer'] === 'floor' && $admitted !== $n) || ($c['peer'] !== 'floor' && $admitted > $allows) ? 1 : 0);
