--TEST--
A wall clock behind a bucket's stored time (faketime) mints no tokens, never moves the stored time back, and counts clock_regressions
--EXTENSIONS--
ratelimit
--INI--
--SKIPIF--
<?php if (!glob('/usr/lib/*/faketime/libfaketime.so.1')) die('skip faketime (libfaketime) needed');
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
// SQLite decides with the host's clock; Redis with its server's (tests/redis_store.rs drives
// a backwards clock through it).
rl_isolate('sqlite');
// PHP dlopen()s extensions with RTLD_DEEPBIND, so the extension's own clock_gettime() calls bypass
// the `faketime` wrapper's LD_PRELOAD. Preloading the extension too (after libfaketime) puts it in
// the global scope, where libfaketime's clock wins.
$faked = fn(string $offset) => ['env' => ['FAKETIME' => $offset, 'LD_PRELOAD' => glob('/usr/lib/*/faketime/libfaketime.so.1')[0] . ' ' . rl_so()]];
$past = $faked('-1h');
$future = $faked('+1h');

// Control: the fake clock reaches the extension. A bucket emptied an hour ago is full now.
rl_run([], 'ratelimit_acquire("probe", 1, 3600);', $past);
echo "control: an hour-old bucket is full again: ", var_export(ratelimit_peek('probe', 1, 3600)->remaining === 1, true), "\n";

// 3 tokens per hour: one token every 1200 s.
$d = ratelimit_acquire('clk', 3, 3600);
echo "now: remaining=$d->remaining\n";

echo "-- a process whose clock is an hour behind\n";
$code = 'echo "clock behind: ", var_export(time() < (int)getenv("RL_NOW") - 3000, true), "\n";'
    . 'for ($i = 0; $i < 3; $i++) { $d = ratelimit_acquire("clk", 3, 3600); echo "  ", $d->allowed ? "allowed" : "denied", " $d->reason remaining=$d->remaining\n"; }'
    . '$p = ratelimit_peek("clk", 3, 3600); echo "  peek remaining=$p->remaining\n";'
    . 'echo "  clock_regressions=", ratelimit_stats()["clock_regressions"], "\n";';
$past['env']['RL_NOW'] = (string)time();
$r = rl_run([], $code, $past);
echo $r['out'], $r['err'];

echo "-- back at the true time\n";
$d = ratelimit_acquire('clk', 3, 3600);
echo "now: ", $d->allowed ? 'allowed' : 'denied', " $d->reason remaining=$d->remaining\n";
// The stored time was not moved back an hour (that would have refilled the bucket).
rl_check('retryAfter ~1200 s', $d->retryAfter > 1190 && $d->retryAfter <= 1200, $d->retryAfter);
echo "clock_regressions=", ratelimit_stats()['clock_regressions'], "\n";

echo "-- a bucket written an hour ahead, then used at the true time\n";
$r = rl_run([], '$d = ratelimit_acquire("fwd", 2, 3600, cost: 2); echo "  ahead: remaining=$d->remaining\n";', $future);
echo $r['out'], $r['err'];
$d = ratelimit_acquire('fwd', 2, 3600);
echo "now: ", $d->allowed ? 'allowed' : 'denied', " $d->reason remaining=$d->remaining\n";
$p = ratelimit_peek('fwd', 2, 3600);
echo "peek: remaining=$p->remaining\n";
echo "clock_regressions=", ratelimit_stats()['clock_regressions'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('clock_backwards_mints_nothing');
?>
--EXPECT--
control: an hour-old bucket is full again: true
now: remaining=2
-- a process whose clock is an hour behind
clock behind: true
  allowed ok remaining=1
  allowed ok remaining=0
  denied rate remaining=0
  peek remaining=0
  clock_regressions=3
-- back at the true time
now: denied rate remaining=0
retryAfter ~1200 s: ok
clock_regressions=3
-- a bucket written an hour ahead, then used at the true time
  ahead: remaining=0
now: denied rate remaining=0
peek: remaining=0
clock_regressions=4
