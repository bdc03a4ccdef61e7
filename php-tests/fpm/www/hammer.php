<?php
// ?s=subject&limit=N&ms=D: for D ms, decides on `s` (limit N a day: the count under test) and
// on `s-busy` (a limit never reached: every call of it writes, under the host's write queue).
// The reason header holds the counts: "ok=A rate=R busy=B other=O" (other: any other answer).
header('X-Worker-Pid: ' . getmypid());
$s = $_GET['s'] ?? 'hammer';
$limit = (int) ($_GET['limit'] ?? 100);
$end = hrtime(true) + 1000000 * (int) ($_GET['ms'] ?? 1000);
$ok = $rate = $busy = $other = 0;
while (hrtime(true) < $end) {
    $d = ratelimit_acquire($s, limit: $limit, per: 86400);
    if ($d->allowed) {
        $ok++;
    } elseif ($d->reason === 'rate') {
        $rate++;
    } else {
        $other++;
    }
    $b = ratelimit_acquire("$s-busy", limit: 1000000000, per: 1);
    $b->allowed ? $busy++ : $other++;
}
header("X-RateLimit-Reason: ok=$ok rate=$rate busy=$busy other=$other");
echo "ok\n";
