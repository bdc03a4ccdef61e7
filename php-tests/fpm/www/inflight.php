<?php
// ?s=subject&inflight=2&ms=300: holds an in-flight slot for ms milliseconds. It counts the
// requests inside (between its acquire and its release) in $RL_TMP/inside-<s>.log, under a lock:
// one line "enter <n inside>" or "exit <n inside>" each.
header('X-Worker-Pid: ' . getmypid());
$s = $_GET['s'] ?? 'inflight';
$d = ratelimit_acquire($s, limit: 1000000, per: 1, inflight: (int)($_GET['inflight'] ?? 2));
header('X-RateLimit-Reason: ' . $d->reason);
if (!$d->allowed) {
    http_response_code(429);
    exit;
}
$base = getenv('RL_TMP') . '/inside-' . md5($s);
function inside(string $base, int $delta): void {
    $f = fopen("$base.count", 'c+');
    flock($f, LOCK_EX);
    $n = (int)stream_get_contents($f) + $delta;
    ftruncate($f, 0);
    rewind($f);
    fwrite($f, (string)$n);
    file_put_contents("$base.log", ($delta > 0 ? 'enter' : 'exit') . " $n\n", FILE_APPEND);
    flock($f, LOCK_UN);
    fclose($f);
}
inside($base, +1);
usleep(1000 * (int)($_GET['ms'] ?? 300));
inside($base, -1);          // leave before releasing, so the count can only err on the high side
ratelimit_release($d);
echo "ok\n";
