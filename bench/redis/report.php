<?php
// The Markdown report of bench/redis/run: php report.php RUN_DIR OUT.md (also printed).
declare(strict_types=1);
require __DIR__ . '/lib.php';

[$_, $run, $out] = $argv;
$meta = [];
foreach (file("$run/meta", FILE_IGNORE_NEW_LINES) as $line) {
    [$k, $v] = explode('=', $line, 2) + [1 => ''];
    $meta[$k] = $v;
}
preg_match_all('/(\w+)=(\S+)/', $meta['n'] ?? '', $m);
$p = array_combine($m[1], $m[2]) + ['n' => $meta['n'] ?? ''];
$p['n'] = explode(' ', $meta['n'])[0];
$peers = explode(' ', $meta['peers']);

function res(string $run, string $name): ?array
{
    $f = "$run/res/$name.json";
    return is_file($f) ? json_decode(file_get_contents($f), true) : null;
}
function us(float|int|null $ns): string
{
    if ($ns === null) {
        return '—';
    }
    $u = $ns / 1000;
    return $u >= 100 ? number_format($u, 0) : number_format($u, 1);
}
function missing(string $run, string $peer, string $what, array $peers): string
{
    if (!in_array($peer, $peers, true)) {
        return 'not measured (left out with --peers)';
    }
    $r = res($run, "$what-$peer");
    return '**not measured**: ' . ($r['not_measured'] ?? 'failed (see the run\'s output)');
}
function ratio(?array $r, ?array $floor, string $k): string
{
    return $r && $floor && ($floor[$k] ?? 0) > 0 && isset($r[$k]) ? sprintf('%.2fx', $r[$k] / $floor[$k]) : '—';
}

$md = [];
$md[] = '# ratelimit benchmark: the Redis backend';
$md[] = '';
$md[] = "- Command: `{$meta['cmdline']}` (from the repository root)";
$md[] = "- Date: {$meta['date']}";
$md[] = "- Machine: {$meta['cpus']} cores, load average {$meta['load_start']} at start, " . ($meta['load_end'] ?? '?') . ' at the end';
$md[] = '- ratelimit: ' . ($meta['so'] !== '' ? "`{$meta['so']}`" : 'not built') . ', built from commit ' . ($meta['commit'] ?? 'unknown');
$md[] = "- Versions: PHP {$meta['php']}, redis-server {$meta['redis']} (save \"\", appendonly no, on 127.0.0.1, started by scripts/redis), phpredis {$meta['phpredis']}";
$md[] = '- Peers: `bench/redis/lib.php`. The floor is an EVALSHA of `return 1` with one key (one round trip, nothing decided); '
    . 'the peer is a careful PHP token bucket on phpredis and one Lua script (integer state, TIME and PEXPIRE in the script).';
if (!empty($meta['rl_note'])) {
    $md[] = "- Note on ratelimit: {$meta['rl_note']}.";
}
$md[] = '';

// 1. one process
$md[] = "## One process: {$p['n']} decisions round-robin over {$p['subjects']} subjects (limit {$p['s_limit']} per {$p['s_per']} s)";
$md[] = '';
$md[] = 'Client and server(s) pinned to CPU 0 (`taskset -c 0` for the client, `taskset -apc 0` for every redis-server): on this VM a round trip '
    . 'to a server on an idle second CPU costs some 40 µs more. Per call, `hrtime` around `acquire()`, in µs.';
$md[] = '';
$md[] = '| Peer | single median | single p99 | cluster median | cluster p99 | median / floor (single, cluster) | admitted / policy allows |';
$md[] = '| --- | ---: | ---: | ---: | ---: | ---: | --- |';
$csv = "$run/res/single-single-cfloor.csv";
if (is_file($csv) && ($rows = array_map('str_getcsv', file($csv, FILE_IGNORE_NEW_LINES))) && count($rows) >= 2) {
    $md[] = sprintf('| *floor: EVALSHA `return 1` from C (redis-benchmark -c 1)* | %s | %s | — | — | — | — |',
        us((float) $rows[1][4] * 1e6), us((float) $rows[1][6] * 1e6));
}
$fs = res($run, 'single-single-floor');
$fc = res($run, 'single-cluster-floor');
// The module is measured in the interleaved rounds only (their section follows the report).
$sequential = array_diff_key(REDIS_PEERS, ['module' => 1]);
foreach ($sequential as $peer => $label) {
    $s = res($run, "single-single-$peer");
    $c = res($run, "single-cluster-$peer");
    if (!$s || isset($s['not_measured']) || !isset($s['median'])) {
        $md[] = "| $label | " . missing($run, $peer, 'single-single', $peers) . ' | | | | | |';
        continue;
    }
    $cOk = $c && isset($c['median']);
    $md[] = sprintf('| %s | %s | %s | %s | %s | %s, %s | %s |', $label, us($s['median']), us($s['p99']),
        $cOk ? us($c['median']) : '—', $cOk ? us($c['p99']) : ($c ? missing($run, $peer, 'single-cluster', $peers) : '—'),
        $peer === 'floor' ? '1' : ratio($s, $fs, 'median'), $peer === 'floor' ? '1' : ($cOk ? ratio($c, $fc, 'median') : '—'),
        $peer === 'floor' ? '—' : "{$s['admitted']} / {$s['allows']}" . ($s['errors'] ? " ({$s['errors']} errors)" : ''));
}
$md[] = '';
$md[] = 'Target (issue 8): ratelimit\'s median at most 1.3x the floor.';
$md[] = '';

// 2. contention
$md[] = "## {$p['procs']} processes, {$p['secs']} s (limit {$p['c_limit']} per {$p['c_per']} s), not pinned";
$md[] = '';
$md[] = '| Peer | topology, subjects | decisions/s (all) | p50 µs | p99 µs | max ms | admitted / policy allows |';
$md[] = '| --- | --- | ---: | ---: | ---: | ---: | --- |';
foreach ([['single', 'same'], ['single', 'distinct'], ['cluster', 'same']] as [$topo, $mode]) {
    foreach ($sequential as $peer => $label) {
        $r = res($run, "contend-$topo-$mode-$peer");
        $what = "$topo, " . ($mode === 'same' ? 'one subject' : 'one subject each');
        if (!$r || !isset($r['per_s']) || $r['failed_procs'] > 0 || $r['n'] === 0) {
            $md[] = "| $label | $what | " . missing($run, $peer, "contend-$topo-$mode", $peers) . ' | | | | |';
            continue;
        }
        $adm = $r['allows'] === null ? '—' : "{$r['admitted']} / {$r['allows']}" . ($r['admitted'] > $r['allows'] ? ' **over-admits**' : '');
        $md[] = sprintf('| %s | %s | %s | %s | %s | %.1f | %s%s |', $label, $what, number_format($r['per_s'], 0), us($r['p50']),
            us($r['p99']), $r['max'] / 1e6, $adm, $r['errors'] ? " ({$r['errors']} errors)" : '');
    }
}
$md[] = '';

// 3. end to end
/** The wrk figures of e2e-NAME.r*.txt: the mean over the rounds (and each round's req/s). */
function wrk(string $run, string $name): ?array
{
    $ms = function (string $v): float {
        preg_match('/([\d.]+)(us|ms|s)/', $v, $m);
        return (float) $m[1] * ['us' => 0.001, 'ms' => 1, 's' => 1000][$m[2]];
    };
    $runs = [];
    foreach (glob("$run/res/e2e-$name.r*.txt") as $f) {
        $t = file_get_contents($f);
        if (!preg_match('/Requests\/sec:\s+([\d.]+)/', $t, $rps)) {
            continue;
        }
        preg_match('/^\s+50%\s+(\S+)/m', $t, $p50);
        preg_match('/^\s+99%\s+(\S+)/m', $t, $p99);
        preg_match('/(\d+) requests in/', $t, $tot);
        preg_match('/Non-2xx or 3xx responses: (\d+)/', $t, $non);
        $echo = substr($f, 0, -4) . '.echo';
        $runs[] = ['rps' => (float) $rps[1], 'p50' => $p50 ? $ms($p50[1]) : 0.0, 'p99' => $p99 ? $ms($p99[1]) : 0.0,
            'total' => (int) ($tot[1] ?? 0), 'non2xx' => (int) ($non[1] ?? 0),
            'echo' => is_file($echo) ? (int) file_get_contents($echo) : 0];
    }
    if (!$runs) {
        return null;
    }
    $mean = fn (string $k) => array_sum(array_column($runs, $k)) / count($runs);
    return ['rps' => $mean('rps'), 'p50' => $mean('p50'), 'p99' => $mean('p99'),
        'total' => array_sum(array_column($runs, 'total')), 'non2xx' => array_sum(array_column($runs, 'non2xx')),
        'echo' => array_sum(array_column($runs, 'echo')), 'rounds' => array_column($runs, 'rps')];
}
$md[] = "## End to end: `wrk -t2 -c16 -d{$p['wrk_secs']}s --latency`, nginx + php-fpm (6 static workers) on 127.0.0.1, the single Redis, one subject";
$md[] = '';
$md[] = 'phpredis with `pconnect` and `redis.pconnect.echo_check_liveness=0` (its default sends an ECHO on every reused connection: the row "ECHO on" shows what that costs). '
    . ($p['rounds'] ?? '1') . ' round(s) of every peer row, the order reversed every other round, in one php-fpm master (ratelimit in a second one, with the extension loaded): req/s, p50 and p99 are the means of the rounds.';
$md[] = '';
$md[] = '| Endpoint | req/s | p50 ms | p99 ms | share of empty | 2xx / 429 |';
$md[] = '| --- | ---: | ---: | ---: | ---: | --- |';
$e1 = wrk($run, 'empty');
$e2 = wrk($run, 'empty-again');
$empty = $e1 && $e2 ? ($e1['rps'] + $e2['rps']) / 2 : ($e1['rps'] ?? null);
$row = function (string $label, ?array $w, string $note = '') use (&$md, $empty): void {
    if (!$w) {
        $md[] = "| $label | $note | | | | |";
        return;
    }
    if (($w['echo'] ?? 0) > 0 && $w['total'] > 0) {
        $note .= sprintf('; %.2f ECHO per request', $w['echo'] / $w['total']);
    }
    if (count($w['rounds']) > 1) {
        $note .= '; rounds: ' . implode(', ', array_map(fn ($r) => number_format($r, 0), $w['rounds'])) . ' req/s';
    }
    $md[] = sprintf('| %s | %s | %.2f | %.2f | %s | %d / %d%s |', $label, number_format($w['rps'], 0), $w['p50'], $w['p99'],
        $empty ? sprintf('%.2f', $w['rps'] / $empty) : '—', $w['total'] - $w['non2xx'], $w['non2xx'], $note);
};
$row('*empty endpoint*', $e1, $e2 ? sprintf(' (mean of %s and %s after)', number_format($e1['rps'] ?? 0, 0), number_format($e2['rps'], 0)) : '');
if (in_array('floor', $peers, true)) {
    $row(REDIS_PEERS['floor'], wrk($run, 'floor'));
}
foreach (['normal' => 'limit never reached', 'attack' => 'under attack: limit 1 a day'] as $scen => $what) {
    if (in_array('peer', $peers, true)) {
        $row(REDIS_PEERS['peer'] . ", $what", wrk($run, "peer-$scen"));
        if ($scen === 'normal') {
            $row(REDIS_PEERS['peer'] . ", $what, ECHO on (phpredis default)", wrk($run, "peer-echo-$scen"));
        }
    }
    $w = wrk($run, "ratelimit-$scen");
    $row(REDIS_PEERS['ratelimit'] . ", $what", $w, $w ? '' : missing($run, 'ratelimit', "e2e-$scen", $peers));
}
$x = wrk($run, 'empty-ext');
if ($x) {
    $row('*empty endpoint, ratelimit loaded*', $x);
}
$md[] = '';
$md[] = 'Target (issue 8): end to end ahead of the phpredis peer.';
$md[] = '';
if (is_file("$run/res/failures.txt")) {
    $md[] = '**This run failed:** ' . implode('; ', file("$run/res/failures.txt", FILE_IGNORE_NEW_LINES));
    $md[] = '';
}
$text = implode("\n", $md);
file_put_contents($out, $text);
echo $text;
