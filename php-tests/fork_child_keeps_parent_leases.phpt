--TEST--
A child forked during a request (pcntl_fork) does not release its parent's leases when it exits
--EXTENSIONS--
ratelimit
pcntl
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$d = ratelimit_acquire('parent', 100, 3600, 1);
var_dump($d->allowed, $d->lease !== null);
$pid = pcntl_fork();
if ($pid === 0) {
    exit(0);   // the child's request shutdown runs here
}
pcntl_waitpid($pid, $status);
echo "child exited: ", pcntl_wexitstatus($status), "\n";
$again = ratelimit_acquire('parent', 100, 3600, 1);
echo "slot still held by the parent: ", $again->reason, "\n";
var_dump(ratelimit_release($d));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('fork_child_keeps_parent_leases');
?>
--EXPECT--
bool(true)
bool(true)
child exited: 0
slot still held by the parent: inflight
bool(true)
