<?php
// Contention: PROCS processes fork()ed from this one (as FPM forks its workers), each with its
// own connection made after the fork, calling acquire() in a loop for SECONDS, on one subject
// ("same") or one subject each ("distinct"). Prints and writes decisions/s (all processes),
// p99 and max per call, and the admitted count against what the policy allows (for "same":
// limit + limit * seconds / per, plus 2 ms of clock granularity).
// Usage: php contend.php JSON  with peer, mode, procs, seconds, limit, per, key (hex), cluster,
// port | seeds, dir, out
declare(strict_types=1);
require __DIR__ . '/lib.php';

$c = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
$c['key'] = hex2bin($c['key']);
$procs = $c['procs'];
@mkdir($c['dir'], 0700, true);
$pids = [];
$stop = bench_kill_children_on_signal($pids);
$run = bin2hex(random_bytes(4));  // fresh subjects each run: no bucket left by another
$start = hrtime(true) + 700_000_000;  // children connect and warm up meanwhile
$end = $start + (int) ($c['seconds'] * 1e9);
for ($i = 0; $i < $procs; $i++) {
    $pid = pcntl_fork();
    if ($pid < 0) {
        $stop();
    }
    if ($pid === 0) {
        $peer = redis_peer($c['peer'], $c);
        $subject = $c['mode'] === 'same' ? "contend-$run" : "contend-$run-$i";
        $peer->acquire("warm-$run-$i");
        while (hrtime(true) < $start) {
            usleep(1000);
        }
        $lat = [];
        $n = $admitted = $errors = 0;
        $first = $last = 0;
        while (($t0 = hrtime(true)) < $end) {
            try {
                $ok = $peer->acquire($subject);
            } catch (Throwable $e) {
                $ok = false;
                $errors++;
            }
            $t1 = hrtime(true);
            $first = $first ?: $t0;
            $last = $t1;
            $lat[] = $t1 - $t0;
            $admitted += (int) $ok;
            $n++;
        }
        $errors += $peer->unavailable ?? 0;
        file_put_contents("{$c['dir']}/lat.$i", pack('P*', ...$lat));
        file_put_contents("{$c['dir']}/res.$i", json_encode(['n' => $n, 'admitted' => $admitted,
            'errors' => $errors, 'first' => $first, 'last' => $last]));
        exit(0);
    }
    $pids[] = $pid;
}
$failed = 0;
foreach ($pids as $pid) {
    pcntl_waitpid($pid, $st);
    $failed += (int) (!pcntl_wifexited($st) || pcntl_wexitstatus($st) !== 0);
}
$pids = [];
$all = [];
$n = $admitted = $errors = 0;
$first = PHP_INT_MAX;
$last = 0;
for ($i = 0; $i < $procs; $i++) {
    $res = json_decode((string) @file_get_contents("{$c['dir']}/res.$i"), true);
    if (!is_array($res)) {
        $failed++;
        continue;
    }
    $all = array_merge($all, array_values(unpack('P*', (string) file_get_contents("{$c['dir']}/lat.$i"))));
    $n += $res['n'];
    $admitted += $res['admitted'];
    $errors += $res['errors'];
    $first = min($first, $res['first']);
    $last = max($last, $res['last']);
}
sort($all);
$elapsed = max(1, $last - $first) / 1e9;
$subjects = $c['mode'] === 'same' ? 1 : $procs;
$allows = $subjects * (int) floor($c['limit'] + $c['limit'] * ($elapsed + 0.002) / $c['per']);
$r = ['peer' => $c['peer'], 'topology' => $c['cluster'] ? 'cluster' : 'single', 'mode' => $c['mode'],
    'procs' => $procs, 'n' => $n, 'per_s' => $n / $elapsed, 'p50' => q_sorted($all, 0.5),
    'p99' => q_sorted($all, 0.99), 'max' => $all ? $all[count($all) - 1] : 0,
    'admitted' => $admitted, 'allows' => $c['peer'] === 'floor' ? null : $allows, 'errors' => $errors,
    'failed_procs' => $failed];
file_put_contents($c['out'], json_encode($r, JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR) . "\n");
printf("  %-9s %-7s %-8s %9.0f decisions/s  p50 %6.1f us  p99 %7.1f us  max %6.1f ms  %s%s\n",
    $c['peer'], $r['topology'], $c['mode'], $r['per_s'], $r['p50'] / 1e3, $r['p99'] / 1e3, $r['max'] / 1e6,
    $c['peer'] === 'floor' ? "returned 1: $admitted/$n" : "admitted $admitted / policy allows $allows",
    $errors || $failed ? "  errors $errors, failed processes $failed" : '');
exit($errors || $failed || ($c['peer'] !== 'floor' && $admitted > $allows) ? 1 : 0);
