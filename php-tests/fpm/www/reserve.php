<?php
// One reservation per request: ?s=subject&limit=5&per=100&max=300 (seconds). 200 when booked
// (X-Wait-For: the wait in ms, 0 when the tokens were there), 429 when not. X-Called-At and
// X-Returned-At (ms, this host's clock, the one the store decides by) bound the decision's
// instant, so the test can tell where each booking lies on the time line.
header('X-Worker-Pid: ' . getmypid());
$called = microtime(true);
$d = ratelimit_reserve($_GET['s'] ?? 'demo', (float)($_GET['max'] ?? 300),
                       limit: (int)($_GET['limit'] ?? 5), per: (float)($_GET['per'] ?? 100));
$returned = microtime(true);
header('X-RateLimit-Reason: ' . $d->reason);
header('X-Wait-For: ' . (int)round($d->waitFor * 1000));
header('X-Called-At: ' . (int)floor($called * 1000));
header('X-Returned-At: ' . (int)ceil($returned * 1000));
http_response_code($d->allowed ? 200 : 429);
echo $d->allowed ? "ok\n" : "Too Many Requests\n";
