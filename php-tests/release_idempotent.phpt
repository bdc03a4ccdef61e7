--TEST--
ratelimit_release(): frees the slot; true only for the call that freed a live lease, false afterwards
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$d1 = ratelimit_acquire('w', 10, 60, 1);
var_dump($d1->allowed, preg_match('/^1[0-9a-f]{96}$/', $d1->lease));
$d2 = ratelimit_acquire('w', 10, 60, 1);
echo "second: $d2->reason lease=", var_export($d2->lease, true), "\n";
echo "release(Decision): ", var_export(ratelimit_release($d1), true), "\n";
echo "again: ", var_export(ratelimit_release($d1), true), "\n";
echo "again by string: ", var_export(ratelimit_release($d1->lease), true), "\n";

$d3 = ratelimit_acquire('w', 10, 60, 1);
echo "after release: ", var_export($d3->allowed, true), ", new lease differs: ", var_export($d3->lease !== $d1->lease, true), "\n";
echo "release(string): ", var_export(ratelimit_release($d3->lease), true), "\n";
echo "release(Decision) after: ", var_export(ratelimit_release($d3), true), "\n";

echo "-- decisions without a lease\n";
var_dump(ratelimit_release(ratelimit_acquire('nolease', 10, 60)));
var_dump(ratelimit_release($d2));
var_dump(ratelimit_release(ratelimit_peek('w', 10, 60)));
var_dump(ratelimit_release('1' . str_repeat('f', 96)));

echo "-- many leases are distinct\n";
$leases = [];
for ($i = 0; $i < 20; $i++) {
    $leases[] = ratelimit_acquire('many', 100, 60, 100)->lease;
}
echo count(array_unique($leases)), " distinct, live=", ratelimit_stats()['live_leases'], "\n";
$freed = 0;
foreach ($leases as $l) {
    $freed += ratelimit_release($l) ? 1 : 0;
    $freed += ratelimit_release($l) ? 1 : 0;
}
echo "freed $freed, live=", ratelimit_stats()['live_leases'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('release_idempotent');
?>
--EXPECT--
bool(true)
int(1)
second: inflight lease=NULL
release(Decision): true
again: false
again by string: false
after release: true, new lease differs: true
release(string): true
release(Decision) after: false
-- decisions without a lease
bool(false)
bool(false)
bool(false)
bool(false)
-- many leases are distinct
20 distinct, live=20
freed 20, live=0
