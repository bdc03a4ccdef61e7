--TEST--
RateLimit\Decision::$source: "store" for what the store decided (an admission, each kind of denial, a peek), "replay" for an admission repeated for its request id; read-only
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$a = ratelimit_acquire('src-i', 5, 60, 1);
$b = ratelimit_acquire('src-i', 5, 60, 1);
ratelimit_acquire('src', 1, 60, 0);
$c = ratelimit_acquire('src', 1, 60, 0);
$p = ratelimit_peek('src', 1, 60);
$r1 = ratelimit_acquire('src-r', 5, 60, 0, 'default', 1, 'req-1');
$r2 = ratelimit_acquire('src-r', 5, 60, 0, 'default', 1, 'req-1');
foreach (['admitted' => $a, 'inflight' => $b, 'rate' => $c, 'peek' => $p, 'first' => $r1, 'retry' => $r2] as $what => $d) {
    echo "$what: reason=$d->reason source=", var_export($d->source, true), "\n";
}
echo "replay: ", var_export($r2->replay && !$r1->replay && $r2->remaining === $r1->remaining, true), "\n";
try {
    $a->source = 'fallback';
} catch (Throwable $e) {
    // ext-php-rs refuses with \Exception, PHP's own readonly properties with \Error.
    echo "write refused\n";
}
echo "still: $a->source\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('decision_source');
?>
--EXPECT--
admitted: reason=ok source='store'
inflight: reason=inflight source='store'
rate: reason=rate source='store'
peek: reason=rate source='store'
first: reason=ok source='store'
retry: reason=ok source='replay'
replay: true
write refused
still: store
