<?php
// Shared by the bench/lib scripts: the peer list, loading a peer, percentiles and histograms.
declare(strict_types=1);

/** name => label; `floor` rows are measured by bench/floor/floor.c, not by a peer file. */
const BENCH_PEERS = [
    'pdo-delete' => 'PDO SQLite, rollback journal',
    'pdo-wal' => 'PDO SQLite, WAL + synchronous=NORMAL',
    'symfony' => 'Symfony RateLimiter, filesystem cache + flock',
    'apcu' => 'APCu (apcu_entry + apcu_cas)',
    'static' => 'per-process static array (wrong)',
    'ratelimit' => '**ratelimit**',
];

const HIST_RES = 64.0;  // histogram buckets per factor e (1.6 % wide)

/** @return object with acquire(string): bool */
function bench_peer(string $name, array $o): object
{
    if (!isset(BENCH_PEERS[$name])) {
        throw new InvalidArgumentException("unknown peer $name");
    }
    $factory = require __DIR__ . "/../peers/$name.php";
    return $factory($o);
}

/** The i-th benchmark subject: an address of 198.18.0.0/15 (RFC 2544 benchmarking range). */
function bench_subject(int $i): string
{
    return '198.' . (18 + ($i >> 16 & 1)) . '.' . ($i >> 8 & 255) . '.' . ($i & 255);
}

/** Nearest-rank quantile of an ascending array (0 for an empty one). */
function q_sorted(array $sorted, float $q): int
{
    $n = count($sorted);
    return $n ? $sorted[max(0, min($n - 1, (int) ceil($q * $n) - 1))] : 0;
}

/** Adds latencies (ns) to a log histogram; returns their maximum. */
function hist_add(array &$h, array $samples): int
{
    $max = 0;
    foreach ($samples as $v) {
        $b = (int) (log(max(1, $v)) * HIST_RES);
        $h[$b] = ($h[$b] ?? 0) + 1;
        if ($v > $max) {
            $max = $v;
        }
    }
    return $max;
}

/** Quantile of a histogram: the upper edge of the bucket holding it (at most 1.6 % high), capped by max. */
function hist_q(array $h, float $q, int $max): float
{
    ksort($h);
    $n = array_sum($h);
    $rank = max(1, (int) ceil($q * $n));
    $seen = 0;
    foreach ($h as $b => $c) {
        $seen += $c;
        if ($seen >= $rank) {
            return min((float) $max, exp(($b + 1) / HIST_RES));
        }
    }
    return (float) $max;
}

/** Points (x = 1/(1-q), latency us) of a quantile function for the HDR-style plot. */
function plot_points(callable $quantile, int $n): array
{
    $pts = [];
    for ($j = 0; ; $j++) {
        $x = 10 ** ($j / 20);
        if ($x > $n) {
            break;
        }
        $pts[] = [$x, $quantile(1 - 1 / $x) / 1000];
    }
    $pts[] = [(float) $n, $quantile(1.0) / 1000];
    return $pts;
}

/** The most the policy admits on one subject in `elapsed` seconds of calls (bucket full at start). */
function policy_allows(int $limit, float $per, float $elapsed): int
{
    // +2 ms: peers read the wall clock at 1 ms (ratelimit) or 1 us resolution.
    return (int) floor($limit + $limit * ($elapsed + 0.002) / $per);
}

function read_samples(string $path): array
{
    $v = array_map('intval', file($path, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES));
    return $v;
}

function write_json(string $path, array $data): void
{
    file_put_contents($path, json_encode($data, JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR) . "\n");
}

function peer_options(array $c, string $dir): array
{
    return ['limit' => $c['limit'], 'per' => (float) $c['per'], 'dir' => $dir, 'key' => hex2bin($c['key'])];
}
