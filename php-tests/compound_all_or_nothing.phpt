--TEST--
ratelimit_acquire_all(): every limit is checked before any is charged; a denial by the second limit charges neither (checked by ratelimit_peek); the decision is the tightest limit's; it counts once
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$limits = [
    ['limit' => 5, 'per' => 1, 'scope' => 'sec'],
    ['limit' => 2, 'per' => 86400, 'scope' => 'day'],
];
function show(string $label, RateLimit\Decision $d): void
{
    echo "$label: allowed=", var_export($d->allowed, true), " reason=$d->reason scope=$d->scope limit=$d->limit remaining=$d->remaining\n";
}
function peeks(): void
{
    echo "peek: sec=", ratelimit_peek('u', 5, 1, 'sec')->remaining, " day=", ratelimit_peek('u', 2, 86400, 'day')->remaining, "\n";
}
show('1st', ratelimit_acquire_all('u', $limits));
show('2nd', ratelimit_acquire_all('u', $limits));
peeks();
echo "-- the day limit denies: the second limit charges neither\n";
$d = ratelimit_acquire_all('u', $limits);
show('3rd', $d);
rl_check('the wait is the day limit\'s', $d->retryAfter > 40000 && $d->retryAfter <= 43200, $d->retryAfter);
peeks();
echo "-- a limit of the same scope used alone is the same bucket\n";
show('single', ratelimit_acquire('u', 2, 86400, 0, 'day'));
$s = ratelimit_stats();
echo "allowed={$s['allowed']} denied_rate={$s['denied_rate']}\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('compound_all_or_nothing');
?>
--EXPECT--
1st: allowed=true reason=ok scope=day limit=2 remaining=1
2nd: allowed=true reason=ok scope=day limit=2 remaining=0
peek: sec=3 day=0
-- the day limit denies: the second limit charges neither
3rd: allowed=false reason=rate scope=day limit=2 remaining=0
the wait is the day limit's: ok
peek: sec=3 day=0
-- a limit of the same scope used alone is the same bucket
single: allowed=false reason=rate scope=day limit=2 remaining=0
allowed=2 denied_rate=2
