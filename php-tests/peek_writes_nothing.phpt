--TEST--
ratelimit_peek(): answers what a cost-1 call would get, and writes nothing (no row, no counter, no token)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$s0 = ratelimit_stats();
$d = ratelimit_peek('ghost', 5, 60);
var_dump($d->allowed, $d->reason, $d->limit, $d->remaining, $d->retryAfter, $d->resetAfter, $d->lease, $d->scope);
for ($i = 0; $i < 20; $i++) {
    ratelimit_peek('ghost' . $i, 5, 60, 'peeked');
}
var_dump(ratelimit_stats() === $s0, ratelimit_stats()['entries']);

echo "-- peeks take no token\n";
ratelimit_acquire('q', 2, 60);
for ($i = 0; $i < 10; $i++) {
    $p = ratelimit_peek('q', 2, 60);
}
echo "peek: ", var_export($p->allowed, true), " remaining=$p->remaining\n";
$s1 = ratelimit_stats();
$d = ratelimit_acquire('q', 2, 60);
echo "acquire: ", var_export($d->allowed, true), " remaining=$d->remaining\n";

echo "-- peek of an exhausted bucket\n";
$s2 = ratelimit_stats();
$p = ratelimit_peek('q', 2, 60);
echo "peek: ", var_export($p->allowed, true), " $p->reason remaining=$p->remaining lease=", var_export($p->lease, true), "\n";
rl_check('retryAfter ~30', $p->retryAfter > 29.0 && $p->retryAfter <= 30.0, $p->retryAfter);
rl_check('resetAfter ~60', $p->resetAfter > 59.0 && $p->resetAfter <= 60.0, $p->resetAfter);
ratelimit_peek('q', 2, 60);
var_dump(ratelimit_stats() === $s2, $s2['allowed'], $s2['denied_rate'], $s2['entries']);

echo "-- peek answers for cost 1 and ignores leases\n";
ratelimit_acquire('l', 3, 60, 1);
$p = ratelimit_peek('l', 3, 60);
echo "peek: ", var_export($p->allowed, true), " $p->reason remaining=$p->remaining\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('peek_writes_nothing');
?>
--EXPECT--
bool(true)
string(2) "ok"
int(5)
int(5)
float(0)
float(0)
NULL
string(7) "default"
bool(true)
int(0)
-- peeks take no token
peek: true remaining=1
acquire: true remaining=0
-- peek of an exhausted bucket
peek: false rate remaining=0 lease=NULL
retryAfter ~30: ok
resetAfter ~60: ok
bool(true)
int(2)
int(0)
int(1)
-- peek answers for cost 1 and ignores leases
peek: true ok remaining=2
