--TEST--
A lease the script did not release ends with its request (the CLI process), also after exit()
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$take = '$d = ratelimit_acquire("job", 10, 60, 1);'
    . 'echo $d->allowed ? "child took lease\n" : "child denied: $d->reason\n";'
    . 'echo "live in child: ", ratelimit_stats()["live_leases"], "\n";';
foreach (['end of script' => '', 'exit(3)' => 'exit(3);', 'exit in a function' => 'function f() { exit(0); } f();'] as $how => $tail) {
    echo "-- $how\n";
    $r = rl_run([], $take . $tail . 'echo "not reached\n";');
    echo $r['out'], $r['err'];
    $s = ratelimit_stats();
    echo "parent: live_leases={$s['live_leases']} leases_expired={$s['leases_expired']}\n";
}
// The slot is free: this process can take it, and so can the next child.
$d = ratelimit_acquire('job', 10, 60, 1);
echo "parent: ", $d->reason, "\n";
ratelimit_release($d);
echo "entries=", ratelimit_stats()['entries'], " remaining=", ratelimit_peek('job', 10, 60)->remaining, "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_end_release');
?>
--EXPECT--
-- end of script
child took lease
live in child: 1
not reached
parent: live_leases=0 leases_expired=0
-- exit(3)
child took lease
live in child: 1
parent: live_leases=0 leases_expired=0
-- exit in a function
child took lease
live in child: 1
parent: live_leases=0 leases_expired=0
parent: ok
entries=1 remaining=6
