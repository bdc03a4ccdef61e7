<?php
// ?s=subject: takes an in-flight slot (inflight: 1), writes this worker's PID to
// $RL_TMP/hold-<md5(s)>.pid and sleeps, so that the test can kill the worker with SIGKILL.
header('X-Worker-Pid: ' . getmypid());
$s = $_GET['s'] ?? 'hold';
$d = ratelimit_acquire($s, limit: 1000000, per: 1, inflight: 1);
header('X-RateLimit-Reason: ' . $d->reason);
if (!$d->allowed) {
    http_response_code(429);
    exit;
}
file_put_contents(getenv('RL_TMP') . '/hold-' . md5($s) . '.pid', getmypid());
sleep(30);
echo "not killed\n";
