--TEST--
Named arguments work for every function, in any order, skipping optional ones
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$d = ratelimit_acquire('192.0.2.1', limit: 5, per: 60);
echo "1: limit=$d->limit remaining=$d->remaining ", $d->headers()['RateLimit-Policy'], "\n";
$d = ratelimit_acquire(cost: 2, limit: 4, subject: 'n2');
echo "2: limit=$d->limit remaining=$d->remaining scope=$d->scope ", $d->headers()['RateLimit-Policy'], "\n";
$d = ratelimit_acquire('n3', scope: 'api');
echo "3: limit=$d->limit remaining=$d->remaining scope=$d->scope\n";
$d = ratelimit_acquire('n4', inflight: 1, per: 30.0);
echo "4: lease=", strlen($d->lease), " ", $d->headers()['RateLimit-Policy'], "\n";
echo "peek: ", ratelimit_peek(scope: 'default', limit: 4, subject: 'n2')->remaining, "\n";
echo "peek: ", ratelimit_peek('192.0.2.1', per: 60, limit: 5)->remaining, "\n";
var_dump(ratelimit_release(lease: $d->lease));
var_dump(ratelimit_reset(scope: 'api', subject: 'n3'));
var_dump(ratelimit_reset(subject: 'n3', scope: 'api'));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('named_arguments');
?>
--EXPECT--
1: limit=5 remaining=4 "default";q=5;w=60
2: limit=4 remaining=2 scope=default "default";q=4;w=60
3: limit=60 remaining=59 scope=api
4: lease=97 "default";q=60;w=30
peek: 2
peek: 4
bool(true)
bool(true)
bool(false)
