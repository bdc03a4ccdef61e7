<?php
// One process, N decisions round-robin over S subjects, each call timed with hrtime.
// Usage: php single.php JSON  with peer, n, subjects, limit, per, dir, key (hex), out, [floor]
declare(strict_types=1);
require __DIR__ . '/common.php';

$c = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
$n = $c['n'];
$subjects = $c['subjects'];
@mkdir($c['dir'], 0700, true);
$errors = 0;
$lastError = null;
$info = [];

if ($c['peer'] === 'floor') {
    $samplesFile = $c['dir'] . '/samples.txt';
    $cmd = [$c['floor'], 'sqlite', $c['dir'] . '/floor.sqlite', (string) $n, (string) $subjects,
        (string) $c['limit'], (string) $c['per'], $samplesFile];
    $t = hrtime(true);
    $p = proc_open($cmd, [1 => ['pipe', 'w']], $pipes);
    $json = stream_get_contents($pipes[1]);
    if (proc_close($p) !== 0) {
        fwrite(STDERR, "floor sqlite failed\n");
        exit(1);
    }
    $elapsed = (hrtime(true) - $t) / 1e9;
    $info = json_decode($json, true, 8, JSON_THROW_ON_ERROR);
    $admitted = $info['admitted'];
    $lat = read_samples($samplesFile);
    unlink($samplesFile);
} else {
    $peer = bench_peer($c['peer'], peer_options($c, $c['dir']));
    [$lat, $admitted, $errors, $lastError, $elapsed] = bench_timed_calls($peer, $subjects, $n, warm: 100, warmSubjects: 4);
    $errors += $peer->unavailable ?? 0;
}

sort($lat);
$allows = 0;
for ($i = 0; $i < $subjects; $i++) {  // subject i gets the calls k = i, i + S, ...
    $calls = intdiv($n - $i + $subjects - 1, $subjects);
    $allows += min($calls, policy_allows($c['limit'], (float) $c['per'], $elapsed));
}
$result = [
    'peer' => $c['peer'], 'n' => $n, 'subjects' => $subjects, 'elapsed' => $elapsed,
    'median' => q_sorted($lat, 0.5), 'p99' => q_sorted($lat, 0.99), 'p999' => q_sorted($lat, 0.999),
    'max' => $lat[$n - 1], 'mean' => array_sum($lat) / $n, 'per_s' => $n / $elapsed,
    'admitted' => $admitted, 'allows' => $allows, 'errors' => $errors, 'last_error' => $lastError,
    'info' => $info,
    'plot' => plot_points(fn (float $q): int => q_sorted($lat, $q), $n),
];
write_json($c['out'], $result);
printf("  %-11s median %7.1f us  p99 %8.1f us  p99.9 %8.1f us  admitted %d/%d%s\n", $c['peer'],
    $result['median'] / 1e3, $result['p99'] / 1e3, $result['p999'] / 1e3, $admitted, $allows,
    $errors ? "  errors $errors ($lastError)" : '');
