<?php
// ?s=subject[&fatal=1]: takes an in-flight slot (inflight: 1) and never releases it; with
// fatal=1 it then dies of a fatal error (HTTP 500). Request shutdown must free the slot.
header('X-Worker-Pid: ' . getmypid());
$d = ratelimit_acquire($_GET['s'] ?? 'forget', limit: 1000000, per: 1, inflight: 1);
header('X-RateLimit-Reason: ' . $d->reason);
http_response_code($d->allowed ? 200 : 429);
if ($d->allowed && !empty($_GET['fatal'])) {
    this_function_does_not_exist();   // Fatal error: Uncaught Error
}
echo "done\n";
