<?php
// The mistake this project exists to fix: a limiter in process memory. Under PHP-FPM each worker
// is its own process (and a plain static array does not even survive one request), so the count
// is kept here in a file per worker PID: 5 per worker, which is 5 x the number of workers.
header('X-Worker-Pid: ' . getmypid());
$file = (getenv('RL_TMP') ?: sys_get_temp_dir()) . '/counter-' . getmypid();
$used = (int)@file_get_contents($file);   // one worker runs one request at a time: no lock needed
$allowed = $used < (int)($_GET['limit'] ?? 5);
if ($allowed) {
    file_put_contents($file, $used + 1);
}
header('X-RateLimit-Reason: ' . ($allowed ? 'ok' : 'rate'));
if (isset($_GET['ms'])) {
    usleep(1000 * (int)$_GET['ms']);
}
http_response_code($allowed ? 200 : 429);
echo $allowed ? "ok\n" : "Too Many Requests\n";
