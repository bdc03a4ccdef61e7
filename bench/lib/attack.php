<?php
// Issue 20's attack on the neighbours: what a legitimate process pays while attackers hammer
// another subject. One legitimate process admits on its own subject (a limit it never reaches)
// in a loop, pausing `pause_us` between calls as a worker between requests; beside it,
// `attackers` processes call as fast as they can on one other subject, limit 1 per hour, so
// every call of theirs but the first is denied:
//   mode "alone":  no attacker;
//   mode "plain":  attackers without a request id (their denials come from the deny cache);
//   mode "fresh":  attackers with a fresh random request id on every call (the attack: no deny
//                  cache can answer them; before issue 20 each was a write transaction).
// All processes are fork()ed from this one (as FPM forks its workers), none opens the store
// before the fork. Prints one JSON line: the legitimate process's calls and latencies (us:
// median, p99, p99.9, max), and the attackers' calls per second.
// Usage: php -d extension=SO -d ratelimit.db_path=DB attack.php JSON
//   with mode, attackers, seconds, pause_us, dir (scratch).
declare(strict_types=1);
require __DIR__ . '/common.php';

$c = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
@mkdir($c['dir'], 0700, true);
$n = $c['mode'] === 'alone' ? 0 : (int) $c['attackers'];
$start = hrtime(true) + 500_000_000;  // every child forked and warmed up by then
$end = $start + (int) ($c['seconds'] * 1e9);
$wait_start = function () use ($start): void {
    while (($wait = $start - hrtime(true)) > 0) {
        usleep((int) min(1000, $wait / 1000));
    }
};

$attackers = [];
for ($i = 0; $i < $n; $i++) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        ratelimit_acquire('bench-warm-' . $i, 1000000000000, 1);
        $wait_start();
        $calls = 0;
        while (hrtime(true) < $end) {
            $id = $c['mode'] === 'fresh' ? bin2hex(random_bytes(8)) : null;
            ratelimit_acquire('attacker', 1, 3600, request_id: $id);
            $calls++;
        }
        file_put_contents("{$c['dir']}/attacker.$i", (string) $calls);
        exit(0);
    }
    $attackers[] = $pid;
}

$legit = pcntl_fork();
if ($legit === 0) {
    ratelimit_acquire('bench-warm-legit', 1000000000000, 1);
    $wait_start();
    $lat = [];
    $denied = 0;
    while (hrtime(true) < $end) {
        $t0 = hrtime(true);
        $d = ratelimit_acquire('legit', 1000000000000, 1);
        $lat[] = hrtime(true) - $t0;
        $denied += $d->allowed ? 0 : 1;
        usleep((int) $c['pause_us']);
    }
    file_put_contents("{$c['dir']}/legit", json_encode(['lat' => $lat, 'denied' => $denied]));
    exit(0);
}

pcntl_waitpid($legit, $status);
foreach ($attackers as $pid) {
    pcntl_waitpid($pid, $status);
}
$l = json_decode(file_get_contents("{$c['dir']}/legit"), true);
$lat = $l['lat'];
sort($lat);
$calls = 0;
for ($i = 0; $i < $n; $i++) {
    $calls += (int) file_get_contents("{$c['dir']}/attacker.$i");
}
echo json_encode([
    'mode' => $c['mode'],
    'calls' => count($lat),
    'denied' => $l['denied'],
    'median_us' => q_sorted($lat, 0.5) / 1000,
    'p99_us' => q_sorted($lat, 0.99) / 1000,
    'p999_us' => q_sorted($lat, 0.999) / 1000,
    'max_us' => ($lat ? end($lat) : 0) / 1000,
    'attack_calls_per_s' => (int) round($calls / $c['seconds']),
]), "\n";
