<?php
// Turns one bench/run directory into the Markdown report (printed and written) and the plot.
// Usage: php report.php RUN_DIR OUT.md OUT.png
declare(strict_types=1);
require __DIR__ . '/common.php';

[, $run, $outMd, $outPng] = $argv;
$meta = [];
foreach (file("$run/meta", FILE_IGNORE_NEW_LINES) as $line) {
    [$k, $v] = explode('=', $line, 2);
    $meta[$k] = $v;
}
$peers = array_values(array_filter(explode(' ', $meta['peers'])));
$so = $meta['so'];
$quick = $meta['quick'] === '1';

function res(string $name): ?array
{
    global $run;
    $f = "$run/res/$name.json";
    return is_file($f) ? json_decode(file_get_contents($f), true, 512, JSON_THROW_ON_ERROR) : null;
}

function us(float $ns): string
{
    $u = $ns / 1000;
    return match (true) {
        $u < 10 => sprintf('%.2f', $u),
        $u < 100 => sprintf('%.1f', $u),
        default => number_format($u, 0, '.', ','),
    };
}

function ms(float $ns): string
{
    $m = $ns / 1e6;
    return $m < 10 ? sprintf('%.2f', $m) : ($m < 100 ? sprintf('%.1f', $m) : number_format($m, 0, '.', ','));
}

function num(float $x): string
{
    return number_format($x, 0, '.', ',');
}

function sh(string $cmd): string
{
    return trim((string) shell_exec($cmd . ' 2>&1'));
}

function label(string $peer, string $section): string
{
    if ($peer !== 'floor') {
        return BENCH_PEERS[$peer];
    }
    return $section === 'single' ? '*floor: bare SQLite WAL transaction from C*'
        : '*floor: ideal lock (flock) around a 10 µs section, C*';
}

// ---- machine and versions ----
$cpu = preg_match('/^model name\s*:\s*(.+)$/m', (string) file_get_contents('/proc/cpuinfo'), $m) ? $m[1] : '?';
$floorSingle = res('single-floor');
$bundled = $floorSingle['info']['sqlite'] ?? '?';
$floorLinked = str_contains(basename($meta['floor'] ?? ''), 'bundled')
    ? 'the SQLite amalgamation the extension bundles (libsqlite3-sys of Cargo.lock)' : 'the system libsqlite3';
$pdoSqlite = (new PDO('sqlite::memory:'))->query('SELECT sqlite_version()')->fetchColumn();
$rlVersion = $so !== '' ? sh('php -n -d extension=' . escapeshellarg($so) . ' -r ' . escapeshellarg('echo phpversion("ratelimit");')) : 'not built';
$rlSqlite = $so !== '' && str_contains(basename($meta['floor'] ?? ''), 'bundled') ? $bundled : '?';
$lines = [];
$lines[] = '# ratelimit benchmark' . ($quick ? ' (--quick: smaller counts, a smoke run only)' : '');
$lines[] = '';
$lines[] = "- Command: `{$meta['cmdline']}` (from the repository root)";
$lines[] = "- Date: {$meta['date']}";
$lines[] = '- Machine: ' . sh('nproc') . " cores, $cpu, Linux " . php_uname('r')
    . ", load average {$meta['load_start']} at start, " . ($meta['load_end'] ?? '?') . ' before the report';
$lines[] = '- Versions: PHP ' . PHP_VERSION . ", ratelimit $rlVersion (bundled SQLite $rlSqlite), "
    . "pdo_sqlite with SQLite $pdoSqlite, php-symfony-rate-limiter "
    . sh("dpkg-query -W -f='\${Version}' php-symfony-rate-limiter") . ', APCu ' . phpversion('apcu')
    . ', nginx ' . preg_replace('/^.*nginx\//', '', sh('nginx -v')) . ', wrk ' . preg_replace('/^wrk (\S+).*/s', '$1', sh('wrk -v | head -n1'));
$lines[] = '- Floors (C, in the same run): the bare SQLite transaction of the PDO peers (BEGIN IMMEDIATE, '
    . "SELECT, UPSERT, COMMIT; WAL, synchronous=NORMAL, prepared statements) linked with $floorLinked "
    . "($bundled); and 8 CPU-bound processes taking an ideal kernel lock (flock) around a 10 µs spin.";
$lines[] = '- Peers: `bench/peers/*.php`. All times are per call (`hrtime` around `acquire()`), in µs unless marked.';
$lines[] = '';

// ---- 1. one process ----
$s = res('single-floor');
$lines[] = sprintf('## One process: %s decisions round-robin over %s subjects (limit 10 per 60 s)',
    num($s['n'] ?? 0), num($s['subjects'] ?? 0));
$lines[] = '';
$lines[] = '| Peer | median µs | p99 µs | p99.9 µs | max µs | decisions/s | admitted / policy allows |';
$lines[] = '| --- | ---: | ---: | ---: | ---: | ---: | --- |';
foreach (array_merge(['floor'], $peers) as $p) {
    $r = res("single-$p");
    if ($r === null) {
        $lines[] = '| ' . label($p, 'single') . ' | not measured | | | | | |';
        continue;
    }
    $adm = num($r['admitted']) . ' / ' . num($r['allows'])
        . ($r['admitted'] > $r['allows'] ? ' **over-admits**' : '')
        . ($r['errors'] ? ", {$r['errors']} errors" : '');
    $lines[] = sprintf('| %s | %s | %s | %s | %s | %s | %s |', label($p, 'single'), us($r['median']),
        us($r['p99']), us($r['p999']), us($r['max']), num($r['per_s']), $adm);
}
$lines[] = '';

// ---- 2. contention ----
foreach (['same' => 'one subject', 'distinct' => 'one subject each'] as $mode => $what) {
    $f = res("contend-$mode-floor");
    $lines[] = sprintf('## Contention: %d processes, %s, %.0f s each (limit 1000 per 1 s)',
        $f['procs'] ?? 8, $what, $f['elapsed'] ?? 0);
    $lines[] = '';
    $lines[] = '| Peer | decisions/s (all) | p99 µs | p99.9 µs | max ms | admitted | granted incl. drain / policy | admission |';
    $lines[] = '| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |';
    foreach (array_merge(['floor'], $peers) as $p) {
        $r = res("contend-$mode-$p");
        if ($r === null) {
            $lines[] = '| ' . label($p, 'contend') . ' | not measured | | | | | | |';
            continue;
        }
        $k = $r['check'];
        if ($k === null) {
            $v = '—';
            $g = '—';
        } else {
            $g = num($k['granted']) . ' / ' . ($k['lo'] === $k['hi'] ? num($k['hi']) : ($k['lo'] ? num($k['lo']) . '–' : '≤ ') . num($k['hi']));
            $v = match (true) {
                $k['over'] > 0 => sprintf('**over-admits** +%s', num($k['over'])),
                $k['under'] > 0 && $mode === 'same' => 'under-admits −' . num($k['under']),
                $k['under'] > 0 => 'within policy (' . num($k['under']) . ' below: a full bucket mints nothing while its process waits)',
                default => 'exact',
            };
            if ($p === 'symfony' && $k['over'] + $k['under'] > 0) {
                $v .= ' (its cache entry expires on a whole-second clock, `time() + lifetime`: a bucket is dropped early and recreated)';
            }
            if ($k['never_denied'] > 0) {
                $v .= $k['never_denied'] === ($mode === 'same' ? 1 : $r['procs']) ? ' (never denied: too slow to empty the bucket)'
                    : " ({$k['never_denied']} subjects never denied)";
            }
        }
        if ($r['errors']) {
            $v .= ", {$r['errors']} " . ($p === 'ratelimit' ? 'unavailable' : 'errors');
        }
        if ($r['failed'] ?? 0) {
            $v .= ", **{$r['failed']} of {$r['procs']} processes died**";
        }
        $lines[] = sprintf('| %s | %s | %s | %s | %s | %s | %s | %s |', label($p, 'contend'), num($r['per_s']),
            us($r['p99']), us($r['p999']), ms($r['max']), $r['admitted'] === null ? '—' : num($r['admitted']), $g, $v);
    }
    $lines[] = '';
    if ($mode === 'same') {
        $lines[] = '*Admission:* when the window closes, the bench drains each bucket until its first denial; the tokens '
            . 'granted (admitted + drained) must equal what the policy minted since the first call, within the timing '
            . 'uncertainty of the first and last call. Processes are fork()ed from one parent, so APCu is shared as in '
            . 'one FPM master. Symfony refills in whole steps (1000 tokens each second); its range accounts for that.';
        $lines[] = '';
    }
}

// ---- 3. end to end ----
function wrk(string $name): ?array
{
    global $run;
    $f = "$run/res/e2e-$name.txt";
    if (!is_file($f)) {
        return null;
    }
    $t = file_get_contents($f);
    $unit = fn (string $v, string $u): float => (float) $v * ['us' => 1e-3, 'ms' => 1.0, 's' => 1e3, 'm' => 6e4][$u];
    $r = ['rps' => preg_match('/Requests\/sec:\s+([\d.]+)/', $t, $m) ? (float) $m[1] : 0.0];
    preg_match('/(\d+) requests in ([\d.]+)(us|ms|s|m),/', $t, $m);
    $r['total'] = (int) ($m[1] ?? 0);
    $r['secs'] = isset($m[2]) ? $unit($m[2], $m[3]) / 1000 : 0.0;
    $r['non2xx'] = preg_match('/Non-2xx or 3xx responses:\s+(\d+)/', $t, $m) ? (int) $m[1] : 0;
    $r['sockerr'] = preg_match('/Socket errors: (.+)/', $t, $m) ? $m[1] : '';
    preg_match_all('/^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$/m', $t, $mm, PREG_SET_ORDER);
    foreach ($mm as $x) {
        $r["p{$x[1]}"] = $unit($x[2], $x[3]);
    }
    return $r;
}

$wrkCmd = preg_match('/^Running .*\n\s+(\d+) threads and (\d+) connections/', (string) @file_get_contents("$run/res/e2e-empty.txt"), $m)
    ? "wrk -t{$m[1]} -c{$m[2]} -d" . (wrk('empty')['secs'] ?? 0) . 's --latency' : 'wrk';
$lines[] = "## End to end: `$wrkCmd`, nginx + php-fpm (6 static workers) on 127.0.0.1, one subject (limit 1000 per 1 s)";
$lines[] = '';
$lines[] = '| Endpoint | req/s | p50 ms | p99 ms | fewer req/s than empty | admitted (2xx) / most the policy allows, notes |';
$lines[] = '| --- | ---: | ---: | ---: | ---: | --- |';
$empty = wrk('empty');
$emptyAgain = wrk('empty-again');
if ($empty && $emptyAgain) {  // measured before and after the peers: their mean is the baseline
    $emptyFirst = $empty['rps'];
    $empty['rps'] = ($empty['rps'] + $emptyAgain['rps']) / 2;
}
$rows = array_merge(['empty'], array_diff($peers, ['ratelimit']), $so !== '' ? ['empty-ext'] : [],
    in_array('ratelimit', $peers, true) ? ['ratelimit'] : []);
foreach ($rows as $p) {
    $r = wrk($p);
    $name = match ($p) {
        'empty' => '*empty endpoint*',
        'empty-ext' => '*empty endpoint, ratelimit loaded*',
        default => BENCH_PEERS[$p],
    };
    if ($r === null || $r['rps'] == 0) {
        $lines[] = "| $name | not measured | | | | |";
        continue;
    }
    $fewer = $p === 'empty' ? '—' : sprintf('%.1f %%', 100 * (1 - $r['rps'] / $empty['rps']));
    if ($p === 'ratelimit' && ($e2 = wrk('empty-ext'))) {
        $fewer .= sprintf(' (%.1f %% vs the empty endpoint with ratelimit loaded)', 100 * (1 - $r['rps'] / $e2['rps']));
    }
    if (str_starts_with($p, 'empty')) {
        $adm = '—';
    } else {
        $adm2xx = $r['total'] - $r['non2xx'];
        $allows = min($r['total'], policy_allows(1000, 1.0, $r['secs']));
        $adm = num($adm2xx) . ' / ' . num($allows) . ($adm2xx > $allows ? ' **over-admits**' : '')
            . ($p === 'static' ? ' (a static array lives for one request)' : '');
    }
    if ($r['sockerr'] !== '') {
        $adm .= " (socket errors: {$r['sockerr']})";
    }
    if ($p === 'empty' && isset($emptyFirst)) {
        $r = $empty;
        $adm = sprintf('mean of %s before and %s after the peers', num($emptyFirst), num($emptyAgain['rps']));
    }
    $lines[] = sprintf('| %s | %s | %s | %s | %s | %s |', $name, num($r['rps']), ms(($r['p50'] ?? 0) * 1e6),
        ms(($r['p99'] ?? 0) * 1e6), $fewer, $adm);
}
if (!$quick) {
    $lines[] = '';
    $lines[] = 'The warm-up run before each measurement leaves the bucket empty, so an exact limiter admits about '
        . '1000 per second of the run, below the upper bound (full bucket + refill) shown.';
}
$lines[] = '';

// ---- the criterion of issue 4: the fastest *correct* limiter ----
// Correct here means: one limit for every worker of a host, across FPM masters and restarts,
// and no over-admission measured in this run. APCu is correct only within one FPM master (its
// memory dies with the master), the static array never; they are shown, not competed with.
$lines[] = '## Fastest correct limiter?';
$lines[] = '';
$lines[] = 'Against the peers that hold one limit for all the workers of a host, across FPM masters and '
    . 'restarts (PDO SQLite in both journal modes, Symfony on the filesystem), leaving out any that over-admitted '
    . 'in this run. APCu (one FPM master only) and the static array (wrong) are not competitors.';
$lines[] = '';
$overAdmits = function (string $p): bool {
    foreach (['same', 'distinct'] as $mode) {
        $r = res("contend-$mode-$p");
        if ($r !== null && ($r['check']['over'] ?? 0) > 0) {
            return true;
        }
    }
    return false;
};
$rivals = array_values(array_filter(['pdo-delete', 'pdo-wal', 'symfony'], fn ($p) => in_array($p, $peers, true) && !$overAdmits($p)));
$metrics = [
    ['one process, median per call', fn ($p) => res("single-$p")['median'] ?? null, false, fn ($v) => us($v) . ' µs'],
    ['one process, p99 per call', fn ($p) => res("single-$p")['p99'] ?? null, false, fn ($v) => us($v) . ' µs'],
    ['8 processes, one subject: decisions/s', fn ($p) => res("contend-same-$p")['per_s'] ?? null, true, fn ($v) => num($v)],
    ['8 processes, one subject: p99 per call', fn ($p) => res("contend-same-$p")['p99'] ?? null, false, fn ($v) => us($v) . ' µs'],
    ['8 processes, one subject each: decisions/s', fn ($p) => res("contend-distinct-$p")['per_s'] ?? null, true, fn ($v) => num($v)],
    ['end to end: req/s', fn ($p) => wrk($p)['rps'] ?? null, true, fn ($v) => num($v)],
    ['end to end: p99', fn ($p) => isset(wrk($p)['p99']) ? wrk($p)['p99'] * 1e6 : null, false, fn ($v) => ms($v) . ' ms'],
];
if (res('single-ratelimit') === null) {
    $lines[] = '- ratelimit was not measured (the extension did not build).';
} elseif ($rivals === []) {
    $lines[] = '- no correct peer was measured in this run.';
} else {
    $lines[] = '| figure | ratelimit | best correct peer | ratelimit ahead? |';
    $lines[] = '| --- | ---: | --- | :---: |';
    foreach ($metrics as [$what, $get, $higher, $fmt]) {
        $mine = $get('ratelimit');
        $best = null;
        foreach ($rivals as $p) {
            $v = $get($p);
            if ($v !== null && ($best === null || ($higher ? $v > $best[1] : $v < $best[1]))) {
                $best = [$p, $v];
            }
        }
        if ($mine === null || $best === null) {
            continue;
        }
        $ahead = $higher ? $mine >= $best[1] : $mine <= $best[1];
        $lines[] = sprintf('| %s | %s | %s (%s) | %s |', $what, $fmt($mine), $fmt($best[1]), label($best[0], 'single'), $ahead ? 'yes' : 'no');
    }
    $rlc = res('contend-same-ratelimit');
    if ($rlc !== null && $rlc['check'] !== null) {
        $k = $rlc['check'];
        $exact = $k['over'] === 0 && $k['under'] === 0 && $rlc['errors'] === 0;
        $lines[] = '';
        $lines[] = sprintf('ratelimit admission under contention (one subject): %s, %s granted (incl. %s drained), the policy minted %s%s.',
            $exact ? 'exact' : 'NOT exact', num($k['granted']), num($k['drained']),
            $k['lo'] === $k['hi'] ? num($k['hi']) : num($k['lo']) . '–' . num($k['hi']),
            $rlc['errors'] ? ", {$rlc['errors']} unavailable" : '');
    }
}
$lines[] = '';
$lines[] = 'Latency distributions: `' . basename($outPng) . '` (per-call latency against percentile, log scales).';
$errLog = "$run/fpm/fpm/php-errors.log";
if (is_file($errLog) && filesize($errLog) > 0) {
    $lines[] = '';
    $lines[] = '**Warning:** PHP logged errors during the end-to-end runs (non-2xx answers then include errors):';
    $lines[] = '```';
    foreach (array_slice(file($errLog, FILE_IGNORE_NEW_LINES), -5) as $l) {
        $lines[] = $l;
    }
    $lines[] = '```';
}
$md = implode("\n", $lines) . "\n";
file_put_contents($outMd, $md);
echo "\n", $md, "\nwritten: $outMd\n";

// ---- plot ----
$dir = "$run/plot";
@mkdir($dir);
$names = array_merge(['floor'], $peers);
$labels = [[], []];
foreach ($names as $p) {
    foreach (['single', 'contend-same'] as $i => $sec) {
        $r = res("$sec-$p");
        $fh = fopen("$dir/$sec-$p.dat", 'w');
        foreach ($r['plot'] ?? [[1, 1]] as [$x, $y]) {
            fprintf($fh, "%.6g %.6g\n", $x, max($y, 0.001));
        }
        fclose($fh);
        $labels[$i][] = '"' . ($p === 'floor' ? ($i ? 'floor: ideal flock lock, 10 µs section (C)' : 'floor: bare SQLite WAL transaction (C)')
            : str_replace('*', '', BENCH_PEERS[$p])) . '"';
    }
}
$colors = ['floor' => '#000000', 'pdo-delete' => '#8c564b', 'pdo-wal' => '#1f77b4', 'symfony' => '#9467bd',
    'apcu' => '#2ca02c', 'static' => '#7f7f7f', 'ratelimit' => '#d62728'];
$flc = res('contend-same-floor');
$vars = [
    'dir' => $dir, 'out' => $outPng, 'peers' => implode(' ', $names),
    'labels1' => implode(' ', $labels[0]), 'labels2' => implode(' ', $labels[1]),
    'colors' => implode(' ', array_map(fn ($p) => $colors[$p], $names)),
    't1' => sprintf('one process, %s decisions over %s subjects', num($s['n'] ?? 0), num($s['subjects'] ?? 0)),
    't2' => sprintf('%d processes on one subject, %.0f s (%s cores)', $flc['procs'] ?? 8, $flc['elapsed'] ?? 0, sh('nproc')),
    'subtitle' => "ratelimit benchmark, {$meta['date']}, " . sh('nproc') . " cores, $cpu",
];
$args = ['gnuplot'];
foreach ($vars as $k => $v) {
    $args[] = '-e';
    $args[] = "$k='" . str_replace("'", "''", $v) . "'";
}
$args[] = __DIR__ . '/../plot.gp';
$p = proc_open($args, [], $pipes);
if (proc_close($p) !== 0) {
    fwrite(STDERR, "report: gnuplot failed\n");
    exit(1);
}
echo "written: $outPng\n";
