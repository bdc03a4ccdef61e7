<?php
// One process, one subject: the median decision with warm caches, then with the caches evicted
// before each call (md5 over a string of MB megabytes), as in a php-fpm worker whose caches
// nginx, wrk and the other workers have used since its last request.
//
//   taskset -c 1 php -n -d extension=target/release/libratelimit.so \
//     -d ratelimit.db_path="$(mktemp -d)/rl.sqlite" bench/experiments/cold.php 8
$mb = (int)($argv[1] ?? 8);
$big = str_repeat('x', $mb << 20);
$warm = $cold = [];
for ($i = 0; $i < 300; $i++) {
    $t = hrtime(true);
    ratelimit_acquire('cold', limit: 1000000000, per: 1.0);
    $warm[] = hrtime(true) - $t;
}
for ($i = 0; $i < 300; $i++) {
    md5($big);
    $t = hrtime(true);
    ratelimit_acquire('cold', limit: 1000000000, per: 1.0);
    $cold[] = hrtime(true) - $t;
}
sort($warm);
sort($cold);
printf("caches evicted with %d MB: warm median %.1f us; cold median %.1f us, p90 %.1f us\n",
    $mb, $warm[150] / 1000, $cold[150] / 1000, $cold[270] / 1000);
