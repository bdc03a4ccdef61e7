<?php
// The interleaved rounds of bench/redis/run (section 1b) as a Markdown section: per peer, the
// median over rounds of each round's median and p99, and their ratios to the floor's.
// Usage: php rounds.php RUN_DIR  (reads RUN_DIR/res/rounds-PEER.rN.json, writes to stdout)
declare(strict_types=1);
require __DIR__ . '/lib.php';

$res = $argv[1] . '/res';
$by = [];
foreach (glob("$res/rounds-*.r*.json") as $f) {
    $r = json_decode(file_get_contents($f), true, 8, JSON_THROW_ON_ERROR);
    preg_match('/\.r(\d+)\.json$/', $f, $m);
    $by[$r['peer']][(int) $m[1]] = $r;
}
function med(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n ? ($n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2) : 0.0;
}
$order = ['floor', 'peer', 'ratelimit', 'module'];
$stat = [];
foreach ($order as $p) {
    if (!isset($by[$p])) {
        continue;
    }
    ksort($by[$p]);
    $stat[$p] = [
        'median' => med(array_column($by[$p], 'median')),
        'p99' => med(array_column($by[$p], 'p99')),
        'medians' => array_column($by[$p], 'median'),
        'p99s' => array_column($by[$p], 'p99'),
        'admitted' => array_sum(array_column($by[$p], 'admitted')),
        'allows' => array_sum(array_column($by[$p], 'allows')),
        'n' => array_sum(array_column($by[$p], 'n')),
        // Calls the store answered (ratelimit's Decision source): with a limit never reached,
        // all of them; the floor and the peer always make a round trip.
        'store' => array_sum(array_map(fn ($r) => $r['sources']['store'] ?? 0, $by[$p])),
    ];
}
$floor = $stat['floor'] ?? null;
$us = fn (float $ns) => sprintf('%.1f', $ns / 1000);
$rounds = count($by['floor'] ?? []);
echo "\n## One process, interleaved rounds: the native commands beside the floor (issue 24)\n\n";
echo "$rounds rounds, each running every peer once in a rotated order ({$by['floor'][1]['n']} decisions round-robin over "
    . "the subjects per run, a limit never reached, so that every call is a round trip to Redis; keys flushed between runs), client and servers pinned to CPU 0. floor, peer and module on a "
    . "redis-server started with `--loadmodule libratelimit_redis.so`, ratelimit (the script path: a plain acquire by a Redis Function where the server has them, Redis 7.0+, else EVALSHA) on a plain one "
    . "(`ratelimit_stats()['redis_path']` checked: \"module\", \"script\"). Figures: the median over rounds of each round's "
    . "median and p99, in µs.\n\n";
echo "| Peer | median | p99 | median / floor | p99 / floor p99 | each round's median | each round's p99 | admitted / policy allows | answered by Redis |\n";
echo "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |\n";
foreach ($stat as $p => $s) {
    $ratio = fn (string $k) => $floor ? sprintf('%.3fx', $s[$k] / $floor[$k]) : '—';
    printf(
        "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
        REDIS_PEERS[$p],
        $us($s['median']),
        $us($s['p99']),
        $p === 'floor' ? '1' : $ratio('median'),
        $p === 'floor' ? '1' : $ratio('p99'),
        implode(', ', array_map($us, $s['medians'])),
        implode(', ', array_map($us, $s['p99s'])),
        $p === 'floor' ? '—' : "{$s['admitted']} / {$s['allows']}",
        in_array($p, ['ratelimit', 'module'], true) ? "{$s['store']} / {$s['n']}" : 'every call'
    );
}
if ($floor && isset($stat['module'])) {
    $m = $stat['module']['median'] / $floor['median'];
    $q = $stat['module']['p99'] / $floor['p99'];
    printf(
        "\nTargets (issue 24): the module's median at most 1.05x the floor's (%.3fx: %s), its p99 at most 1.2x the floor's p99 (%.3fx: %s).\n",
        $m,
        $m <= 1.05 ? 'met' : 'not met',
        $q,
        $q <= 1.2 ? 'met' : 'not met'
    );
}
if ($floor && isset($stat['ratelimit'], $stat['peer'])) {
    $r = $stat['ratelimit']['median'] / $floor['median'];
    $below = $stat['ratelimit']['median'] < $stat['peer']['median'];
    printf(
        "Targets (issue 24): the script path's median at most 1.25x the floor's (%.3fx: %s), and below the phpredis + Lua peer's (%s vs %s µs: %s).\n",
        $r,
        $r <= 1.25 ? 'met' : 'not met',
        $us($stat['ratelimit']['median']),
        $us($stat['peer']['median']),
        $below ? 'met' : 'not met'
    );
}
