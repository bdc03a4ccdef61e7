<?php
// ?s=subject&ms=N[&scope=S]: takes an in-flight slot (inflight: 1), writes "PID LEASE" to
// $RL_TMP/hold-<md5(s)>.pid and holds the slot N ms (then request end releases it, if it is
// still held), so that another host can release it by its token, or the test can SIGKILL this
// worker and watch the lease expire at lease_ttl.
require __DIR__ . '/_common.inc';
$s = $_GET['s'] ?? 'hold';
$d = rt_decide(fn () => ratelimit_acquire($s, limit: 1000000, per: 1, inflight: 1,
    scope: $_GET['scope'] ?? 'default'));
if (!$d->allowed) {
    http_response_code(429);
    exit;
}
header('X-Lease: ' . $d->lease);
file_put_contents(getenv('RL_TMP') . '/hold-' . md5($s) . '.pid', getmypid() . ' ' . $d->lease);
usleep(1000 * (int) ($_GET['ms'] ?? 3000));
echo "held\n";
