<?php
// One decision for a request id: ?s=subject&id=ID&limit=3&inflight=0 (&hold_ms=N writes
// "PID" to $RL_TMP/retry-<md5(s.id)>.pid once decided and sleeps N ms, holding its lease;
// &fatal=1 dies of a fatal error after the decision). X-RateLimit-Reason: "<reason>/<remaining>",
// "replay/<remaining>" for a replay. ?stats=1 answers X-Retries and X-In-Progress:
// ratelimit_stats()['retries'] and ['denied_in_progress'].
header('X-Worker-Pid: ' . getmypid());
if (isset($_GET['stats'])) {
    $s = ratelimit_stats();
    header('X-Retries: ' . $s['retries']);
    header('X-In-Progress: ' . $s['denied_in_progress']);
    exit;
}
$s = $_GET['s'] ?? 'retry';
$id = $_GET['id'] ?? null;
$d = ratelimit_acquire($s, limit: (int)($_GET['limit'] ?? 3), per: 86400,
                       inflight: (int)($_GET['inflight'] ?? 0), request_id: $id);
header('X-RateLimit-Reason: ' . ($d->replay ? 'replay' : $d->reason) . '/' . $d->remaining);
http_response_code($d->allowed ? 200 : 429);
if (isset($_GET['fatal'])) {
    undefined_function_after_the_decision();
}
if (isset($_GET['hold_ms'])) {
    file_put_contents(getenv('RL_TMP') . '/retry-' . md5($s . $id) . '.pid', (string)getmypid());
    usleep(1000 * (int)$_GET['hold_ms']);
}
echo $d->allowed ? "ok\n" : "Too Many Requests\n";
