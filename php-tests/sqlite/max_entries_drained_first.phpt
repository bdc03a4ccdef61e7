--TEST--
ratelimit.max_entries: a drained bucket (full again) makes room before the least recently used one, without counting as evicted
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-max_entries_drained_first/db.sqlite
error_log={TMP}/rl-phpt-max_entries_drained_first/php-errors.log
ratelimit.max_entries=3
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();

ratelimit_acquire('b', 10, 3600);       // least recently used
usleep(120000);
ratelimit_acquire('c', 10, 3600);
usleep(120000);
ratelimit_acquire('fast', 1, 0.05);     // most recently used, but full again after 50 ms
usleep(150000);
ratelimit_acquire('d', 10, 3600);       // needs room: 'fast' holds no information
$s = ratelimit_stats();
echo "entries={$s['entries']} evicted={$s['evicted']}\n";
echo "b=", ratelimit_peek('b', 10, 3600)->remaining, " c=", ratelimit_peek('c', 10, 3600)->remaining, " d=", ratelimit_peek('d', 10, 3600)->remaining, "\n";
// Now nothing is drained: the least recently used (b) goes, counted.
ratelimit_acquire('e', 10, 3600);
$s = ratelimit_stats();
echo "entries={$s['entries']} evicted={$s['evicted']} b=", ratelimit_peek('b', 10, 3600)->remaining, " c=", ratelimit_peek('c', 10, 3600)->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('max_entries_drained_first');
?>
--EXPECT--
entries=3 evicted=0
b=9 c=9 d=9
entries=3 evicted=1 b=10 c=9
