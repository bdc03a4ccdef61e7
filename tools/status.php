<?php
/*
 * ratelimit status page: the backend, the host-wide counters and their rates since the last
 * refresh, the pressure view (ratelimit_top()) and a chart of the decisions of the last minutes.
 * One self-contained file, no framework, no external assets, no JavaScript. As with APCu's apc.php
 * or nginx's stub_status: put it behind your own authentication (it names no client, but shows
 * traffic and pseudonyms an outsider has no business seeing), e.g. in nginx
 *
 *     location = /ratelimit-status.php { allow 10.0.0.0/8; deny all; auth_basic ...; ... }
 *
 * History: nothing is stored on the server. Every refresh (a <meta> refresh every REFRESH
 * seconds) carries the previous samples of the decisions in its own URL (?h=..., and ?p=...
 * for the other counters at the last sample): the page reads them, strictly, adds the current
 * one and keeps the last HISTORY. Each viewer has its own history; a forged ?h= only changes
 * what that viewer's own page draws. Everything printed is escaped.
 */

declare(strict_types=1);

const REFRESH = 10;  // seconds between refreshes
const HISTORY = 36;  // samples kept: 6 minutes at REFRESH = 10
const TOP = 10;      // buckets in the pressure view
const DECISIONS = ['allowed', 'denied_rate', 'denied_inflight', 'unavailable'];
const OTHERS = ['denied_in_progress', 'leases_expired', 'evicted', 'clock_regressions', 'keys_migrated', 'reopened',
    'storage_errors', 'dry_run_denied', 'retries', 'redis_errors', 'fallback_switches', 'fallback_decisions'];
const COLOURS = ['allowed' => '#3a9a4a', 'denied_rate' => '#e08a1e', 'denied_inflight' => '#8a5ac8', 'unavailable' => '#c83a3a'];

header('Content-Type: text/html; charset=utf-8');
header('Cache-Control: no-store');
header('Referrer-Policy: no-referrer');    // the history rides in the URL
header('X-Content-Type-Options: nosniff');
header("Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");

function h(string|int|float $s): string
{
    return htmlspecialchars((string)$s, ENT_QUOTES | ENT_SUBSTITUTE | ENT_HTML5, 'UTF-8');
}

/** The samples carried in ?h=: "t-allowed-rate-inflight-unavailable" joined by "_", oldest first. */
function read_history(mixed $raw, int $now): array
{
    if (!is_string($raw) || strlen($raw) > 40 * HISTORY) {
        return [];
    }
    $samples = [];
    foreach (explode('_', $raw) as $part) {
        if (!preg_match('/^(\d{1,13})-(\d{1,18})-(\d{1,18})-(\d{1,18})-(\d{1,18})$/D', $part, $m)) {
            return [];
        }
        $t = (int)$m[1];
        $prev = end($samples);
        if ($t > $now || ($prev !== false && $t <= $prev['t'])) {
            return [];
        }
        $samples[] = ['t' => $t] + array_combine(DECISIONS, array_map('intval', array_slice($m, 2)));
    }
    return $samples;
}

function write_history(array $samples): string
{
    return implode('_', array_map(fn($s) => implode('-', [$s['t'], ...array_map(fn($k) => $s[$k], DECISIONS)]), $samples));
}

function ago(float $seconds): string
{
    $seconds = max(0.0, $seconds);
    return $seconds < 100 ? sprintf('%.1f s', $seconds) : sprintf('%d min', (int)round($seconds / 60));
}

$now = (int)round(microtime(true) * 1000);
$error = null;
$stats = [];
$top = [];
$backend = 'unknown';
$breaker = 'unknown';
$version = phpversion('ratelimit') ?: 'not loaded';
try {
    if (!extension_loaded('ratelimit')) {
        throw new RuntimeException('the ratelimit extension is not loaded in this PHP');
    }
    $stats = ratelimit_stats();
    $top = ratelimit_top(TOP);
    $backend = (string)($stats['backend'] ?? 'unknown');
    $breaker = (string)($stats['breaker'] ?? 'closed');
} catch (Throwable $e) {
    $error = get_class($e) . ': ' . $e->getMessage();
}

$history = read_history($_GET['h'] ?? '', $now);
$current = ['t' => $now] + array_combine(DECISIONS, array_map(fn($k) => (int)($stats[$k] ?? 0), DECISIONS));
$last = end($history) ?: null;
// A counter that went down: a fresh database. Its history no longer compares.
if ($last !== null && array_filter(DECISIONS, fn($k) => $current[$k] < $last[$k])) {
    $history = [];
    $last = null;
}
// The other counters at the last sample: "leases_expired-evicted-...", as OTHERS lists them.
$p = $_GET['p'] ?? '';
if ($last !== null && is_string($p) && preg_match('/^\d{1,18}(-\d{1,18}){' . (count(OTHERS) - 1) . '}$/D', $p)) {
    $last += array_combine(OTHERS, array_map('intval', explode('-', $p)));
}
$since = $last === null ? null : ($now - $last['t']) / 1000;
$history = array_slice([...$history, $current], -HISTORY);
$next = '?h=' . write_history($history) . '&p=' . implode('-', array_map(fn($k) => (int)($stats[$k] ?? 0), OTHERS));
$db_path = (string)ini_get('ratelimit.db_path');
$names = [
    'allowed' => 'allowed', 'denied_rate' => 'denied: rate', 'denied_inflight' => 'denied: in flight',
    'unavailable' => 'unavailable', 'leases_expired' => 'leases expired', 'evicted' => 'evicted',
    'clock_regressions' => 'clock regressions', 'keys_migrated' => 'keys migrated',
    'reopened' => 'database reopened', 'storage_errors' => 'storage errors',
    'dry_run_denied' => 'shadow: would-be denials', 'retries' => 'replays (same request id)',
    'denied_in_progress' => 'denied: in progress (same request id)',
    'redis_errors' => 'Redis errors', 'fallback_switches' => 'switches to the local fallback',
    'fallback_decisions' => 'decided by the local fallback',
];

/** The chart: decisions per second in each interval between samples, stacked by result. */
function chart(array $history): string
{
    $w = 720;
    $hgt = 180;
    $pad = 34;
    $bars = [];
    for ($i = 1; $i < count($history); $i++) {
        $dt = max(0.001, ($history[$i]['t'] - $history[$i - 1]['t']) / 1000);
        $bar = ['t' => $history[$i]['t'], 'dt' => $dt];
        foreach (DECISIONS as $k) {
            $bar[$k] = max(0, $history[$i][$k] - $history[$i - 1][$k]) / $dt;
        }
        $bars[] = $bar;
    }
    $max = 0.0;
    foreach ($bars as $b) {
        $max = max($max, array_sum(array_map(fn($k) => $b[$k], DECISIONS)));
    }
    $scale = $max > 0 ? ($hgt - 2 * $pad) / $max : 0;
    $slot = ($w - 2 * $pad) / (HISTORY - 1);
    $out = sprintf('<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="decisions per second" width="%d" height="%d" viewBox="0 0 %d %d">', $w, $hgt, $w, $hgt);
    $out .= sprintf('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>', $pad, $hgt - $pad, $w - $pad, $hgt - $pad);
    $out .= sprintf('<text x="%d" y="%d" font-size="11" fill="#555">%s/s</text>', 2, $pad - 6, h(sprintf('%.1f', $max)));
    $out .= sprintf('<text x="%d" y="%d" font-size="11" fill="#555">0</text>', 2, $hgt - $pad + 4);
    if (!$bars) {
        $out .= sprintf('<text x="%d" y="%d" font-size="13" fill="#777">the chart fills in at each refresh</text>', $pad + 10, $hgt / 2);
    }
    $x0 = $w - $pad - count($bars) * $slot;
    foreach ($bars as $i => $b) {
        $y = $hgt - $pad;
        $title = [];
        foreach (DECISIONS as $k) {
            $bh = $b[$k] * $scale;
            $title[] = sprintf('%s %.2f/s', $k, $b[$k]);
            if ($bh > 0) {
                $y -= $bh;
                $out .= sprintf('<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>', h($k), $x0 + $i * $slot + 1, $y, max(1.0, $slot - 2), $bh, COLOURS[$k]);
            }
        }
        $out .= sprintf('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="transparent"><title>%s</title></rect>', $x0 + $i * $slot, $pad, $slot, $hgt - 2 * $pad, h(gmdate('H:i:s', intdiv($b['t'], 1000)) . ' UTC, over ' . sprintf('%.1f s', $b['dt']) . ': ' . implode(', ', $title)));
    }
    $out .= sprintf('<text x="%d" y="%d" font-size="11" fill="#555">%s</text>', $pad, $hgt - 10, h(sprintf('the last %d intervals of about %d s, oldest left', HISTORY - 1, REFRESH)));
    return $out . '</svg>';
}
?>
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex">
<meta http-equiv="refresh" content="<?= h(REFRESH . ';url=' . $next) ?>">
<link rel="icon" href="data:,">
<title>ratelimit status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; } td, th { padding: .2em .8em .2em 0; text-align: right; }
th:first-child, td:first-child { text-align: left; } th { border-bottom: 1px solid #ccc; }
.muted { color: #777; } .error { color: #a00; font-weight: bold; } code { font-size: 12px; }
.legend span { display: inline-block; width: .8em; height: .8em; margin: 0 .3em 0 1em; }
</style>
</head>
<body>
<h1>ratelimit status</h1>
<p class="muted">
  Backend <strong id="backend"><?= h($backend) ?></strong>, breaker <strong id="breaker"><?= h($breaker) ?></strong>,
  extension <?= h($version) ?>,
  database <code><?= h($db_path !== '' ? $db_path : '(default: <temp dir>/php-ratelimit-<euid>/php-ratelimit.sqlite)') ?></code>.
  At <?= h(gmdate('Y-m-d H:i:s', intdiv($now, 1000))) ?> UTC; refreshes every <?= h(REFRESH) ?> s
  (<a href="<?= h($next) ?>">now</a>, <a href="?">clear history</a>).
</p>
<?php if ($error !== null): ?>
<p class="error" id="error"><?= h($error) ?></p>
<?php endif ?>

<h2>Counters</h2>
<table id="counters">
<tr><th>counter</th><th>total</th><th><?= h($since === null ? 'per second' : sprintf('per second, last %.1f s', $since)) ?></th></tr>
<?php foreach ($names as $key => $label): ?>
<?php
    $value = (int)($stats[$key] ?? 0);
    $rate = '';
    if ($last !== null && isset($last[$key]) && $since > 0) {
        $rate = sprintf('%.2f', ($value - $last[$key]) / $since);
    }
?>
<tr><td><?= h($label) ?></td><td data-counter="<?= h($key) ?>"><?= h($value) ?></td><td data-rate="<?= h($key) ?>"><?= h($rate === '' ? '–' : $rate) ?></td></tr>
<?php endforeach ?>
<tr><td>buckets stored</td><td data-counter="entries"><?= h((int)($stats['entries'] ?? 0)) ?></td><td></td></tr>
<tr><td>leases live</td><td data-counter="live_leases"><?= h((int)($stats['live_leases'] ?? 0)) ?></td><td></td></tr>
</table>

<h2>Decisions over the last minutes</h2>
<p class="legend"><?php foreach (COLOURS as $k => $c): ?><span style="background: <?= h($c) ?>"></span><?= h($names[$k]) ?><?php endforeach ?></p>
<?= chart($history) ?>

<h2>Pressure: the <?= h(TOP) ?> buckets with the most denials</h2>
<?php if (!$top): ?>
<p class="muted" id="no-pressure">No bucket has been denied.</p>
<?php else: ?>
<table id="top">
<tr><th>pseudonym</th><th>denied</th><th>rate</th><th>in flight</th><th>allowed</th><th>live leases</th><th>tokens held</th><th>full again in</th><th>last used</th></tr>
<?php foreach ($top as $b): ?>
<tr>
  <td><code><?= h($b['pseudonym']) ?></code></td><td><?= h($b['denied']) ?></td><td><?= h($b['denied_rate']) ?></td>
  <td><?= h($b['denied_inflight']) ?></td><td><?= h($b['allowed']) ?></td><td><?= h($b['live_leases']) ?></td>
  <td><?= h(sprintf('%.3f', $b['tokens'])) ?></td><td><?= h(ago($b['full_at'] - $now / 1000)) ?></td><td><?= h(ago($now / 1000 - $b['used_at'])) ?> ago</td>
</tr>
<?php endforeach ?>
</table>
<p class="muted">A pseudonym is the bucket's HMAC of (scope, subject): the same client in the same scope always has the same one, and it cannot be turned back into the client.</p>
<?php endif ?>
</body>
</html>
