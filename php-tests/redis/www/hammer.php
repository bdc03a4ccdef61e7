<?php
// ?s=subject&limit=N&ms=D&every=E: for D ms, decides on `s-busy` (a limit never reached) and,
// every E-th time (default 1), on `s` (limit N a day: the count under test). Every decision
// reads the host's breaker file first. The reason header holds the counts:
// "ok=A rate=R busy=B other=O" (other: any other answer, or an exception).
require __DIR__ . '/_common.inc';
$s = $_GET['s'] ?? 'hammer';
$limit = (int) ($_GET['limit'] ?? 100);
$every = max(1, (int) ($_GET['every'] ?? 1));
$end = hrtime(true) + 1000000 * (int) ($_GET['ms'] ?? 1000);
$ok = $rate = $busy = $other = 0;
for ($i = 0; hrtime(true) < $end; $i++) {
    try {
        if ($i % $every == 0) {
            $d = ratelimit_acquire($s, limit: $limit, per: 86400);
            if ($d->allowed) {
                $ok++;
            } elseif ($d->reason === 'rate') {
                $rate++;
            } else {
                $other++;
            }
        }
        $b = ratelimit_acquire("$s-busy", limit: 1000000000, per: 1);
        $b->allowed ? $busy++ : $other++;
    } catch (RateLimit\Exception $e) {
        $other++;
    }
}
header("X-RateLimit-Reason: ok=$ok rate=$rate busy=$busy other=$other");
echo "ok\n";
