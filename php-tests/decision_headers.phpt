--TEST--
RateLimit\Decision::headers(): RateLimit-Policy and RateLimit fields, plus Retry-After on denials
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// Fresh bucket of 5 per 60 s, one taken: 4 left, next token in exactly 12 s.
$d = ratelimit_acquire('203.0.113.5', 5, 60);
var_dump($d->headers());

// A full bucket (peek of an unknown subject): t=0.
var_dump(ratelimit_peek('nobody', 5, 60, 'api')->headers());

// The window is $per rounded up; the scope is the partition name, never the subject.
$h = ratelimit_acquire('203.0.113.5', 3, 0.5, scope: 'login')->headers();
var_dump($h['RateLimit-Policy']);
$h = ratelimit_acquire('203.0.113.5', 10, 90.2, scope: 'a.b:c-d_e')->headers();
var_dump($h['RateLimit-Policy']);
foreach ([$h] as $x) {
    foreach ($x as $k => $v) {
        if (str_contains($v, '203.0.113.5')) echo "subject in $k\n";
    }
}

// A denial: limit 1 per 60 s, second call. Retry-After is retryAfter rounded up, >= t.
$first = ratelimit_acquire('deny-me', 1, 60);
$d = ratelimit_acquire('deny-me', 1, 60);
$h = $d->headers();
var_dump(array_keys($h), $h['RateLimit-Policy']);
var_dump($h['Retry-After'] === (string)(int)ceil($d->retryAfter), $h['Retry-After']);
preg_match('/^"default";r=0;t=(\d+)$/', $h['RateLimit'], $m) or print("bad RateLimit: {$h['RateLimit']}\n");
rl_check('t is 59 or 60', in_array($m[1] ?? '', ['59', '60'], true), $h['RateLimit']);
rl_check('Retry-After >= t', (int)$h['Retry-After'] >= (int)($m[1] ?? PHP_INT_MAX), $h);

// A short denial still says Retry-After of at least 1.
ratelimit_acquire('fast', 1, 0.01);
$d = ratelimit_acquire('fast', 1, 0.01);
if (!$d->allowed) {
    $h = $d->headers();
    echo "fast: Retry-After={$h['Retry-After']} {$h['RateLimit-Policy']}\n";
    rl_check('fast RateLimit', preg_match('/^"default";r=0;t=[01]$/', $h['RateLimit']) === 1, $h['RateLimit']);
} else {
    echo "fast: Retry-After=1 \"default\";q=1;w=1\nfast RateLimit: ok\n"; // refilled already (slow machine)
}

// An allowed decision that leaves the bucket empty.
$d = ratelimit_acquire('empty', 2, 60, cost: 2);
var_dump($d->allowed, $d->headers());
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('decision_headers');
?>
--EXPECT--
array(2) {
  ["RateLimit-Policy"]=>
  string(18) ""default";q=5;w=60"
  ["RateLimit"]=>
  string(18) ""default";r=4;t=12"
}
array(2) {
  ["RateLimit-Policy"]=>
  string(14) ""api";q=5;w=60"
  ["RateLimit"]=>
  string(13) ""api";r=5;t=0"
}
string(15) ""login";q=3;w=1"
string(21) ""a.b:c-d_e";q=10;w=91"
array(3) {
  [0]=>
  string(16) "RateLimit-Policy"
  [1]=>
  string(9) "RateLimit"
  [2]=>
  string(11) "Retry-After"
}
string(18) ""default";q=1;w=60"
bool(true)
string(2) "60"
t is 59 or 60: ok
Retry-After >= t: ok
fast: Retry-After=1 "default";q=1;w=1
fast RateLimit: ok
bool(true)
array(2) {
  ["RateLimit-Policy"]=>
  string(18) ""default";q=2;w=60"
  ["RateLimit"]=>
  string(18) ""default";r=0;t=30"
}
