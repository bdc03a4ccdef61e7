--TEST--
ratelimit.max_entries: when every bucket holds a live lease, a new subject is "unavailable"; existing subjects still work
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-max_entries_all_leased_unavailable/db.sqlite
error_log={TMP}/rl-phpt-max_entries_all_leased_unavailable/php-errors.log
ratelimit.max_entries=3
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();

$la = ratelimit_acquire('a', 10, 3600, 2);
$lb = ratelimit_acquire('b', 10, 3600, 1);
$lc = ratelimit_acquire('c', 10, 3600, 1);
$d = ratelimit_acquire('d', 10, 3600, 1);
echo "new subject: allowed=", var_export($d->allowed, true), " reason=$d->reason lease=", var_export($d->lease, true), " limit=$d->limit remaining=$d->remaining\n";
$d = ratelimit_acquire('d2', 10, 3600);
echo "new subject without lease: allowed=", var_export($d->allowed, true), " reason=$d->reason\n";
$a2 = ratelimit_acquire('a', 10, 3600, 2);
echo "existing subject: ", var_export($a2->allowed, true), " $a2->reason\n";
$s = ratelimit_stats();
echo "entries={$s['entries']} evicted={$s['evicted']} unavailable={$s['unavailable']} live_leases={$s['live_leases']}\n";

ratelimit_release($la);
ratelimit_release($a2);
$d = ratelimit_acquire('d', 10, 3600, 1);
echo "after a's leases end: ", var_export($d->allowed, true), " $d->reason\n";
$s = ratelimit_stats();
echo "entries={$s['entries']} evicted={$s['evicted']} a=", ratelimit_peek('a', 10, 3600)->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('max_entries_all_leased_unavailable');
?>
--EXPECT--
new subject: allowed=false reason=unavailable lease=NULL limit=10 remaining=0
new subject without lease: allowed=false reason=unavailable
existing subject: true ok
entries=3 evicted=0 unavailable=2 live_leases=4
after a's leases end: true ok
entries=3 evicted=1 a=10
