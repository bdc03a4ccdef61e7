<?php
// One-process latency of ratelimit_acquire, to compare two builds in the same run (run by hand;
// the trust checks run when a worker opens its store, so they must not move these figures):
//   for so in OLD.so NEW.so; do php -n -d extension=$so php-tests/trust/median.php same; done
// Mode "same": one subject; "distinct": a new subject each call. 20,000 timed calls after 200
// of warm-up, on a fresh database in a fresh private directory. Prints the first call (which
// opens the key and the database), the median and the p99, in microseconds.
$mode = $argv[1] ?? 'same';
$n = (int)($argv[2] ?? 20000);
$dir = sys_get_temp_dir() . '/rl-median-' . getmypid() . '-' . bin2hex(random_bytes(4));
mkdir($dir, 0700);
$key = "$dir/k.key";
file_put_contents($key, random_bytes(32));
chmod($key, 0600);
// ratelimit.* are PHP_INI_SYSTEM: run the timed loop in a child with them set.
$code = <<<'PHP'
$mode = $argv[1]; $n = (int)$argv[2];
$t = hrtime(true); ratelimit_acquire('first', 1000000, 60); $first = (hrtime(true) - $t) / 1e3;
for ($i = 0; $i < 200; $i++) ratelimit_acquire("warm$i", 1000000, 60);
$lat = [];
for ($i = 0; $i < $n; $i++) {
    $s = $mode === 'same' ? '198.51.100.7' : 'user-' . $i;
    $t = hrtime(true);
    ratelimit_acquire($s, 1000000, 60);
    $lat[] = hrtime(true) - $t;
}
sort($lat);
printf("%s: first call %.0f us, median %.2f us, p99 %.2f us (%d calls)\n", $mode, $first,
    $lat[intdiv($n, 2)] / 1e3, $lat[(int)($n * 0.99)] / 1e3, $n);
PHP;
$so = null;   // the .so this process was given with -d extension=
foreach (explode("\0", (string)file_get_contents('/proc/self/cmdline')) as $arg) {
    if (preg_match('/^(?:-d)?extension=(.*ratelimit.*)$/', $arg, $m)) $so = $m[1];
}
$cmd = [PHP_BINARY, '-n', '-d', "extension=$so", '-d', "ratelimit.db_path=$dir/rl.sqlite",
    '-d', "ratelimit.key_file=$key", '-r', $code, '--', $mode, (string)$n];
$p = proc_open($cmd, [1 => STDOUT, 2 => STDERR], $pipes);
$rc = proc_close($p);
exec('rm -rf ' . escapeshellarg($dir));
exit($rc);
