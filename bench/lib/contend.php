<?php
// Contention: PROCS processes fork()ed from this one (as FPM forks its workers, so APCu is
// shared), each calling acquire() in a loop for SECONDS, on one subject ("same") or on one
// subject each ("distinct"). Per-call latencies go to a log histogram.
// Admission check: when the window closes, this (parent) process drains each subject's bucket
// until the first denial. Tokens granted (admitted in the window + drained) must then equal what
// the policy has minted since the bucket's creation, up to the timing uncertainty of the first
// and the last call (and 2 ms of clock granularity): more is over-admission, less is
// under-admission (a denial while tokens were there), unless the subject was never denied.
// Usage: php contend.php JSON  with peer, mode, procs, seconds, limit, per, dir, key, out, [floor]
declare(strict_types=1);
require __DIR__ . '/common.php';

$c = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
$procs = $c['procs'];
@mkdir($c['dir'], 0700, true);

if ($c['peer'] === 'floor') {
    $prefix = $c['dir'] . '/floor';
    $p = proc_open([$c['floor'], 'flock', $c['dir'] . '/floor.lock', (string) $procs,
        (string) $c['seconds'], (string) $c['section_ns'], $prefix], [], $pipes);
    if (proc_close($p) !== 0) {
        fwrite(STDERR, "floor flock failed\n");
        exit(1);
    }
    $children = [];
    for ($i = 0; $i < $procs; $i++) {
        $lat = read_samples("$prefix.$i");
        unlink("$prefix.$i");
        $h = [];
        $max = hist_add($h, $lat);
        $children[] = ['n' => count($lat), 'admitted' => null, 'errors' => 0, 'max' => $max,
            'hist' => $h, 'busy' => array_sum($lat) / 1e9, 'first' => 0, 'last' => (int) ($c['seconds'] * 1e9)];
    }
} else {
    $pids = [];
    $stop = bench_kill_children_on_signal($pids);
    // Set the state up once (file, table, WAL) as a deployment would, then drop the connection:
    // nothing of it may cross the fork. (ratelimit creates its file itself; its connection must
    // not be opened before the fork, as in FPM, whose master never decides.)
    if ($c['peer'] !== 'ratelimit') {
        $setup = bench_peer($c['peer'], peer_options($c, $c['dir']));
        $setup->acquire('192.0.2.200');
        unset($setup);
    }
    $start = hrtime(true) + 700_000_000;  // children construct their peer and warm up meanwhile
    $end = $start + (int) ($c['seconds'] * 1e9);
    for ($i = 0; $i < $procs; $i++) {
        $pid = pcntl_fork();
        if ($pid < 0) {
            $stop();
        }
        if ($pid === 0) {
            pcntl_signal(SIGTERM, SIG_DFL);
            pcntl_signal(SIGINT, SIG_DFL);
            $peer = bench_peer($c['peer'], peer_options($c, $c['dir']));
            for ($k = 0; $k < 20; $k++) {
                $peer->acquire('192.0.2.' . (10 + $i));
            }
            $subject = $c['mode'] === 'same' ? bench_subject(1) : bench_subject(256 + $i);
            while (($wait = $start - hrtime(true)) > 0) {
                usleep((int) min(1000, $wait / 1000));
            }
            $lat = [];
            $h = [];
            $n = $admitted = $errors = $max = 0;
            $lastError = null;
            $firstT1 = 0;
            $first = hrtime(true);
            do {
                $t0 = hrtime(true);
                try {
                    $ok = $peer->acquire($subject);
                } catch (Throwable $e) {
                    $ok = false;
                    $errors++;
                    $lastError = $e->getMessage();
                }
                $t1 = hrtime(true);
                $lat[] = $t1 - $t0;
                if ($ok) {
                    $admitted++;
                }
                if ($firstT1 === 0) {
                    $firstT1 = $t1;
                }
                if (count($lat) === 4096) {
                    $max = max($max, hist_add($h, $lat));
                    $n += 4096;
                    $lat = [];
                }
            } while ($t1 < $end);
            $max = max($max, hist_add($h, $lat));
            $n += count($lat);
            write_json($c['dir'] . "/child.$i.json", ['n' => $n, 'admitted' => $admitted,
                'errors' => $errors + ($peer->unavailable ?? 0), 'last_error' => $lastError,
                'max' => $max, 'hist' => $h, 'first' => $first, 'first_t1' => $firstT1, 'last' => $t1,
                'subject' => $subject, 'step' => $peer->refillStep ?? null]);
            exit(0);
        }
        $pids[$i] = $pid;
    }
    $deadline = $end + 30_000_000_000;  // a call may block for PDO's 5 s busy timeout; never more
    $failed = 0;
    while ($pids && hrtime(true) < $deadline) {
        foreach ($pids as $i => $pid) {
            if (pcntl_waitpid($pid, $st, WNOHANG) === $pid) {
                unset($pids[$i]);
                if (!pcntl_wifexited($st) || pcntl_wexitstatus($st) !== 0) {
                    $failed++;
                }
            }
        }
        usleep(20_000);
    }
    foreach ($pids as $pid) {
        posix_kill($pid, SIGKILL);
        pcntl_waitpid($pid, $st);
        $failed++;
    }
    if ($failed) {
        fwrite(STDERR, "contend: $failed of $procs processes failed ({$c['peer']})\n");
    }
    $children = [];
    for ($i = 0; $i < $procs; $i++) {
        if (is_file($f = $c['dir'] . "/child.$i.json")) {
            $children[] = json_decode(file_get_contents($f), true);
        }
    }
    if ($children === []) {
        exit(1);
    }
}

/**
 * [lo, hi]: tokens the policy has minted on a bucket created during [$c0, $c1] (ns) by a decision
 * during [$d0, $d1]: continuous, or in whole steps [tokens, seconds] (Symfony).
 */
function minted(array $c, ?array $step, int $c0, int $c1, int $d0, int $d1): array
{
    $slack = 0.002;  // ratelimit reads a millisecond wall clock
    $short = max(0.0, ($d0 - $c1) / 1e9 - $slack);
    $long = ($d1 - $c0) / 1e9 + $slack;
    if ($step !== null) {
        return [$c['limit'] + $step[0] * (int) floor($short / $step[1]), $c['limit'] + $step[0] * (int) floor($long / $step[1])];
    }
    $rate = $c['limit'] / $c['per'];
    return [(int) ceil($c['limit'] + $rate * $short) - 1, (int) floor($c['limit'] + $rate * $long)];
}

$h = [];
$n = $max = $errors = 0;
$admitted = $c['peer'] === 'floor' ? null : 0;
$first = PHP_INT_MAX;
$last = 0;
$lastError = null;
$subjects = [];  // subject => [admitted, calls, first t0, first t1, step]
foreach ($children as $ch) {
    foreach ($ch['hist'] as $b => $cnt) {
        $h[$b] = ($h[$b] ?? 0) + $cnt;
    }
    $n += $ch['n'];
    $max = max($max, $ch['max']);
    $errors += $ch['errors'];
    $lastError = $ch['last_error'] ?? $lastError;
    $first = min($first, $ch['first']);
    $last = max($last, $ch['last']);
    if ($admitted !== null) {
        $admitted += $ch['admitted'];
        $s = &$subjects[$ch['subject']];
        $s ??= [0, 0, PHP_INT_MAX, PHP_INT_MAX, $ch['step'], 0];
        $s = [$s[0] + $ch['admitted'], $s[1] + $ch['n'], min($s[2], $ch['first']), min($s[3], $ch['first_t1']),
            $s[4], max($s[5], $ch['last'])];
        unset($s);
    }
}
$elapsed = ($last - $first) / 1e9;
$check = null;
if ($admitted !== null) {
    $peer = bench_peer($c['peer'], peer_options($c, $c['dir']));
    $check = ['granted' => 0, 'drained' => 0, 'lo' => 0, 'hi' => 0, 'over' => 0, 'under' => 0, 'never_denied' => 0];
    foreach ($subjects as $subject => [$adm, $calls, $c0, $c1, $step, $end]) {
        $drained = 0;
        if ($adm === $calls) {  // never denied: its bucket may have sat full, so only the upper bound holds
            $check['never_denied']++;
            [, $hi] = minted($c, $step, $c0, $c1, $end, $end);
            $check['granted'] += $adm;
            $check['hi'] += $hi;
            $check['over'] += max(0, $adm - $hi);
            continue;
        }
        $cap = 2 * $c['limit'] + (int) ($c['limit'] / $c['per'] * ($elapsed + 10));
        do {  // until the first denial (or far past what any policy allows)
            $d0 = hrtime(true);
            $ok = $peer->acquire((string) $subject);
            $d1 = hrtime(true);
            $drained += (int) $ok;
        } while ($ok && $drained < $cap);
        [$lo, $hi] = minted($c, $step, $c0, $c1, $d0, $d1);
        $granted = $adm + $drained;
        $check['granted'] += $granted;
        $check['drained'] += $drained;
        $check['lo'] += $lo;
        $check['hi'] += $hi;
        $check['over'] += max(0, $granted - $hi);
        $check['under'] += max(0, $lo - $granted);
    }
    $errors += $peer->unavailable ?? 0;
}
$result = [
    'peer' => $c['peer'], 'mode' => $c['mode'], 'procs' => $procs, 'n' => $n, 'elapsed' => $elapsed,
    'per_s' => $n / $elapsed, 'median' => hist_q($h, 0.5, $max), 'p99' => hist_q($h, 0.99, $max),
    'p999' => hist_q($h, 0.999, $max), 'max' => $max, 'admitted' => $admitted, 'check' => $check,
    'errors' => $errors, 'last_error' => $lastError, 'failed' => $failed ?? 0,
    'plot' => plot_points(fn (float $q): float => hist_q($h, $q, $max), $n),
];
write_json($c['out'], $result);
printf("  %-11s %-8s %9.0f/s  p99 %8.1f us  max %9.1f us  admitted %s%s%s\n", $c['peer'], $c['mode'],
    $result['per_s'], $result['p99'] / 1e3, $max / 1e3, $admitted ?? '-',
    $check ? sprintf(', granted incl. drain %d, policy %d..%d%s%s', $check['granted'], $check['lo'], $check['hi'],
        $check['over'] ? " OVER-ADMITS +{$check['over']}" : '', $check['under'] ? " under by {$check['under']}" : '') : '',
    $errors ? "  errors $errors ($lastError)" : '');
