--TEST--
Refill: a bucket polled more often than it earns one milli-token still refills on time (the time base keeps the fraction)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

// 1 token per 2 s: one milli-token every 2 ms; polled about every 0.3 ms.
$d = ratelimit_acquire('slow', 1, 2.0);
$t = hrtime(true);
echo "took: ", $d->reason, "\n";
$polls = 0;
$allowedAt = null;
while (rl_since($t) < 3.5 && $polls < 20000) {
    $polls++;
    if (ratelimit_acquire('slow', 1, 2.0)->allowed) {
        $allowedAt = rl_since($t);
        break;
    }
    usleep(300);
}
rl_check('allowed again after about 2 s', $allowedAt !== null && $allowedAt >= 1.95 && $allowedAt < 2.5, [$allowedAt, $polls]);
rl_check('polled often', $polls > 1000, $polls);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('refill_polled_often');
?>
--EXPECT--
took: ok
allowed again after about 2 s: ok
polled often: ok
