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

/**
 * One process's run, shared by bench/lib/single.php and bench/redis/single.php: $warm untimed
 * calls over $warmSubjects subjects of their own (connection, statements, caches), then $n calls
 * of $peer->acquire() round-robin over $subjects benchmark subjects, each timed with hrtime (an
 * exception counts as an error, not an admission).
 * @return array{0: int[], 1: int, 2: int, 3: ?string, 4: float} latencies (ns), admitted, errors,
 *   the last error's message, elapsed seconds
 */
function bench_timed_calls(object $peer, int $subjects, int $n, int $warm, int $warmSubjects): array
{
    for ($i = 0; $i < $warm; $i++) {
        $peer->acquire('192.0.2.' . ($i % $warmSubjects));
    }
    // What answered is counted over the measured calls only.
    if (property_exists($peer, 'sources')) {
        $peer->sources = [];
    }
    $subj = [];
    for ($i = 0; $i < $subjects; $i++) {
        $subj[] = bench_subject($i);
    }
    $lat = array_fill(0, $n, 0);
    $admitted = $errors = 0;
    $lastError = null;
    $t = hrtime(true);
    for ($k = 0; $k < $n; $k++) {
        $s = $subj[$k % $subjects];
        $t0 = hrtime(true);
        try {
            $ok = $peer->acquire($s);
        } catch (Throwable $e) {
            $ok = false;
            $errors++;
            $lastError = $e->getMessage();
        }
        $lat[$k] = hrtime(true) - $t0;
        $admitted += (int) $ok;
    }
    return [$lat, $admitted, $errors, $lastError, (hrtime(true) - $t) / 1e9];
}

/**
 * On SIGTERM or SIGINT, SIGKILL the forked children in $pids (the caller fills it) and exit 1;
 * returns that handler, which the caller also calls when a fork fails. Shared by the contention
 * runs of bench/lib and bench/redis.
 */
function bench_kill_children_on_signal(array &$pids): Closure
{
    pcntl_async_signals(true);
    $stop = function () use (&$pids): void {
        foreach ($pids as $pid) {
            posix_kill($pid, SIGKILL);
        }
        exit(1);
    };
    pcntl_signal(SIGTERM, $stop);
    pcntl_signal(SIGINT, $stop);
    return $stop;
}

function peer_options(array $c, string $dir): array
{
    return ['limit' => $c['limit'], 'per' => (float) $c['per'], 'dir' => $dir, 'key' => hex2bin($c['key'])];
}
