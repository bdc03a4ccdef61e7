--TEST--
A lease ends with its request also when the request dies of a fatal error (uncaught exception, memory exhaustion, E_USER_ERROR)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$deaths = [
    'uncaught' => 'undefined_function_xyz();',
    'memory' => 'ini_set("memory_limit", "8M"); $s = str_repeat("x", 64 * 1024 * 1024);',
    'user_error' => 'trigger_error("boom", E_USER_ERROR);',
    'stack' => 'function r($n) { return r($n + 1) + 1; } ini_set("memory_limit", "16M"); r(0);',
];
foreach ($deaths as $subject => $death) {
    $code = '$d = ratelimit_acquire("' . $subject . '", 10, 60, 1);'
        . 'echo $d->allowed ? "took lease\n" : "denied\n"; fflush(STDOUT);' . $death . 'echo "survived\n";';
    $r = rl_run([], $code);
    $fatal = preg_match('/Fatal error/', $r['out'] . $r['err']) === 1;
    echo "$subject: ", trim(strtok($r['out'], "\n")), ", fatal: ", $fatal ? 'yes' : 'no', ", exit code ", $r['rc'] === 0 ? '0' : 'non-zero', "\n";
}
$s = ratelimit_stats();
echo "parent: live_leases={$s['live_leases']} leases_expired={$s['leases_expired']}\n";
foreach (array_keys($deaths) as $subject) {
    $d = ratelimit_acquire($subject, 10, 60, 1);
    echo "$subject: ", $d->reason, "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_end_release_fatal');
?>
--EXPECT--
uncaught: took lease, fatal: yes, exit code non-zero
memory: took lease, fatal: yes, exit code non-zero
user_error: took lease, fatal: yes, exit code non-zero
stack: took lease, fatal: yes, exit code non-zero
parent: live_leases=0 leases_expired=0
uncaught: ok
memory: ok
user_error: ok
stack: ok
