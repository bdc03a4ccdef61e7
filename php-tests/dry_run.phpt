--TEST--
ratelimit.dry_run: a shadow scope computes and charges every decision as for real, answers allowed with the real reason and dryRun, no lease and no Retry-After for a would-be denial, counts exactly the would-be denials; other scopes are real; "*" covers every scope; an invalid value warns at startup and every call throws naming the directive
--EXTENSIONS--
ratelimit
--INI--
ratelimit.dry_run=shadow, other
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "-- rate\n";
for ($i = 0; $i < 4; $i++) {
    $d = ratelimit_acquire('c', 2, 60, 0, 'shadow');
    echo "allowed=", var_export($d->allowed, true), " reason=$d->reason dryRun=", var_export($d->dryRun, true),
        " remaining=$d->remaining retry-after header: ", var_export(isset($d->headers()['Retry-After']), true), "\n";
}
rl_check('a would-be denial keeps its real wait', $d->retryAfter > 25 && $d->retryAfter <= 30, $d->retryAfter);
echo "charged as for real: remaining ", ratelimit_peek('c', 2, 60, 'shadow')->remaining, "\n";
echo "-- inflight\n";
$a = ratelimit_acquire('f', 10, 60, 1, 'other');
$b = ratelimit_acquire('f', 10, 60, 1, 'other');
echo "first: reason=$a->reason dryRun=", var_export($a->dryRun, true), " lease=", var_export($a->lease !== null, true), "\n";
echo "second: allowed=", var_export($b->allowed, true), " reason=$b->reason dryRun=", var_export($b->dryRun, true), " lease=", var_export($b->lease, true), "\n";
echo "-- a real scope denies\n";
ratelimit_acquire('c', 1, 60);
$d = ratelimit_acquire('c', 1, 60);
echo "allowed=", var_export($d->allowed, true), " reason=$d->reason dryRun=", var_export($d->dryRun, true), " retry-after header: ", var_export(isset($d->headers()['Retry-After']), true), "\n";
$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']} denied_inflight={$s['denied_inflight']} dry_run_denied={$s['dry_run_denied']} live_leases={$s['live_leases']}\n";
echo "-- another process counts in the same file; * covers every scope\n";
$r = rl_run(['ratelimit.dry_run' => '*'], '$d = ratelimit_acquire("c", 1, 60); echo $d->reason, " ", var_export($d->allowed, true), " ", var_export($d->dryRun, true), "\n";');
echo trim($r['out']), "\n";
rl_pause(1.1);
echo "dry_run_denied=", ratelimit_stats()['dry_run_denied'], "\n";
echo "-- invalid values warn, and every call throws naming the directive\n";
foreach (['api,', 'a b', '!x'] as $bad) {
    $r = rl_run(['ratelimit.dry_run' => $bad, 'display_startup_errors' => '1', 'error_log' => ''],
        'try { ratelimit_acquire("c", 1, 60); echo "decided\n"; } catch (RateLimit\Exception $e) { echo "threw: ", $e->getMessage(), "\n"; }');
    $warned = str_contains($r['out'] . $r['err'], 'Invalid value') && str_contains($r['out'] . $r['err'], 'ratelimit.dry_run');
    preg_match('/^threw: (.*)$/m', $r['out'], $m);
    echo var_export($bad, true), ": warned=", var_export($warned, true), " threw naming it: ",
        var_export(str_contains($m[1] ?? '', 'ratelimit.dry_run (expected'), true), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('dry_run');
?>
--EXPECT--
-- rate
allowed=true reason=ok dryRun=false remaining=1 retry-after header: false
allowed=true reason=ok dryRun=false remaining=0 retry-after header: false
allowed=true reason=rate dryRun=true remaining=0 retry-after header: false
allowed=true reason=rate dryRun=true remaining=0 retry-after header: false
a would-be denial keeps its real wait: ok
charged as for real: remaining 0
-- inflight
first: reason=ok dryRun=false lease=true
second: allowed=true reason=inflight dryRun=true lease=NULL
-- a real scope denies
allowed=false reason=rate dryRun=false retry-after header: true
allowed=4 denied_rate=3 denied_inflight=1 dry_run_denied=3 live_leases=1
-- another process counts in the same file; * covers every scope
rate true true
dry_run_denied=4
-- invalid values warn, and every call throws naming the directive
'api,': warned=true threw naming it: true
'a b': warned=true threw naming it: true
'!x': warned=true threw naming it: true
