--TEST--
php.ini values are the defaults of null arguments: limit, per, inflight; an explicit argument overrides them
--EXTENSIONS--
ratelimit
--INI--
ratelimit.limit=7
ratelimit.per=14
ratelimit.inflight=1
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$d = ratelimit_acquire('x');
echo "limit=$d->limit remaining=$d->remaining lease=", strlen((string)$d->lease), " ", $d->headers()['RateLimit-Policy'], "\n";
printf("resetAfter %.3f\n", $d->resetAfter);
$d2 = ratelimit_acquire('x');
echo "second: $d2->reason\n";
$d3 = ratelimit_acquire('x', null, null, 0);
echo "inflight 0: ", var_export($d3->allowed, true), " lease=", var_export($d3->lease, true), "\n";
$d4 = ratelimit_acquire('y', 3, null, null);
echo "y: limit=$d4->limit ", $d4->headers()['RateLimit-Policy'], " lease=", strlen((string)$d4->lease), "\n";
$p = ratelimit_peek('z');
echo "peek: limit=$p->limit remaining=$p->remaining ", $p->headers()['RateLimit-Policy'], "\n";
$p = ratelimit_peek('z', per: 28.0);
echo "peek: ", $p->headers()['RateLimit-Policy'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('ini_values_used');
?>
--EXPECT--
limit=7 remaining=6 lease=97 "default";q=7;w=14
resetAfter 2.000
second: inflight
inflight 0: true lease=NULL
y: limit=3 "default";q=3;w=14 lease=97
peek: limit=7 remaining=7 "default";q=7;w=14
peek: "default";q=7;w=28
