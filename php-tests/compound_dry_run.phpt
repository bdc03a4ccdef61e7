--TEST--
ratelimit_acquire_all() with shadow scopes: nothing is charged when any limit denies; denied only by shadow limits it is allowed with dryRun and the real reason, no Retry-After, counted as dry_run_denied; a real limit's denial is a denial
--EXTENSIONS--
ratelimit
--INI--
ratelimit.dry_run=shadow
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$limits = [
    ['limit' => 5, 'per' => 60, 'scope' => 'real'],
    ['limit' => 1, 'per' => 60, 'scope' => 'shadow'],
];
function show(string $label, RateLimit\Decision $d): void
{
    echo "$label: allowed=", var_export($d->allowed, true), " reason=$d->reason dryRun=", var_export($d->dryRun, true),
        " scope=$d->scope retry-after header: ", var_export(isset($d->headers()['Retry-After']), true), "\n";
}
show('1st', ratelimit_acquire_all('c', $limits));
show('2nd (the shadow limit would deny)', ratelimit_acquire_all('c', $limits));
echo "nothing charged by it: real remaining ", ratelimit_peek('c', 5, 60, 'real')->remaining, "\n";
echo "-- the real limit denies too\n";
for ($i = 0; $i < 4; $i++) {
    ratelimit_acquire('c', 5, 60, 0, 'real');
}
show('3rd', ratelimit_acquire_all('c', $limits));
$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']} dry_run_denied={$s['dry_run_denied']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('compound_dry_run');
?>
--EXPECT--
1st: allowed=true reason=ok dryRun=false scope=shadow retry-after header: false
2nd (the shadow limit would deny): allowed=true reason=rate dryRun=true scope=shadow retry-after header: false
nothing charged by it: real remaining 4
-- the real limit denies too
3rd: allowed=false reason=rate dryRun=false scope=real retry-after header: true
allowed=5 denied_rate=2 dry_run_denied=1
