--TEST--
After a fork (pcntl_fork, as FPM forks its workers), parent and child both keep working on the shared file
--EXTENSIONS--
ratelimit
pcntl
posix
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();

ratelimit_acquire('before-fork', 100, 3600);   // the connection is open in the parent now
$pid = pcntl_fork();
if ($pid === 0) {
    $ok = 0;
    try {
        for ($i = 0; $i < 50; $i++) {
            $ok += ratelimit_acquire('forked', 1000, 3600)->allowed ? 1 : 0;
        }
        file_put_contents("$dir/child.txt", "$ok " . ratelimit_stats()['allowed']);
    } catch (Throwable $e) {
        file_put_contents("$dir/child.txt", get_class($e) . ': ' . $e->getMessage());
    }
    posix_kill(getmypid(), SIGKILL);   // leave without running the parent's shutdown twice
}
$ok = 0;
for ($i = 0; $i < 50; $i++) {
    $ok += ratelimit_acquire('forked', 1000, 3600)->allowed ? 1 : 0;
}
pcntl_waitpid($pid, $status);
echo "parent admitted: $ok\n";
echo "child: ", @file_get_contents("$dir/child.txt") ?: 'nothing', "\n";
echo "remaining: ", ratelimit_peek('forked', 1000, 3600)->remaining, "\n";
echo "allowed in stats: ", ratelimit_stats()['allowed'], "\n";
$r = rl_run([], 'echo ratelimit_peek("forked", 1000, 3600)->remaining, "\n";');
echo "another process sees: ", $r['out'], $r['err'];
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('fork_reopens_connection');
?>
--EXPECTF--
parent admitted: 50
child: 50 %d
remaining: 900
allowed in stats: 101
another process sees: 900
