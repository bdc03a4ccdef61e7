--TEST--
ratelimit.max_entries: a new subject beyond the bound evicts the least recently used bucket, counted as evicted, logged once (table full)
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-max_entries_evicts_lru/db.sqlite
ratelimit.max_entries=3
error_log={TMP}/rl-phpt-max_entries_evicts_lru/php-errors.log
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();

function use_(string $s): void { ratelimit_acquire($s, 10, 3600); usleep(120000); }
function show(): void {
    $s = ratelimit_stats();
    $r = [];
    foreach (['a', 'b', 'c', 'd', 'e'] as $x) $r[] = "$x=" . ratelimit_peek($x, 10, 3600)->remaining;
    echo implode(' ', $r), " | entries={$s['entries']} evicted={$s['evicted']}\n";
}
use_('a'); use_('b'); use_('c');
show();
use_('a');          // b is now the least recently used
use_('d');
show();
use_('e');          // c is now the least recently used
show();
echo "evicted subject starts afresh: ", ratelimit_acquire('b', 10, 3600)->remaining, "\n";
show();
$log = (string)file_get_contents(ini_get('error_log'));
echo "log: ", substr_count($log, 'table full'), " 'table full' line within 10 s, names a subject: ",
    var_export((bool)preg_match('/\b[abcde]=/', $log), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('max_entries_evicts_lru');
?>
--EXPECT--
a=9 b=9 c=9 d=10 e=10 | entries=3 evicted=0
a=8 b=10 c=9 d=9 e=10 | entries=3 evicted=1
a=8 b=10 c=10 d=9 e=9 | entries=3 evicted=2
evicted subject starts afresh: 9
a=10 b=9 c=10 d=9 e=9 | entries=3 evicted=3
log: 1 'table full' line within 10 s, names a subject: false
