<?php
// ?s=subject: takes an in-flight slot (inflight: 1), writes "PID MS" (this worker's PID and the
// wall-clock ms just after the slot was taken, so no earlier than the lease's own start) to
// $RL_TMP/hold-<md5(s)>.pid and sleeps, so that the test can kill the worker with SIGKILL and
// check that the slot does not come back before lease_ttl.
header('X-Worker-Pid: ' . getmypid());
$s = $_GET['s'] ?? 'hold';
$d = ratelimit_acquire($s, limit: 1000000, per: 1, inflight: 1);
$taken = (int) ceil(microtime(true) * 1000);
header('X-RateLimit-Reason: ' . $d->reason);
if (!$d->allowed) {
    http_response_code(429);
    exit;
}
file_put_contents(getenv('RL_TMP') . '/hold-' . md5($s) . '.pid', getmypid() . ' ' . $taken);
sleep(30);
echo "not killed\n";
