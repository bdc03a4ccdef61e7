--TEST--
ratelimit_top(): the buckets with the most denials, by pseudonym only, the same from another process
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "empty: ", json_encode(ratelimit_top()), "\n";
$t0 = microtime(true);
for ($i = 0; $i < 7; $i++) ratelimit_acquire('top-hammering', 1, 3600);    // 1 allowed, 6 rate
for ($i = 0; $i < 3; $i++) ratelimit_acquire('top-second', 1, 3600);       // 1 allowed, 2 rate
for ($i = 0; $i < 4; $i++) ratelimit_acquire('top-calm', 100, 60);         // 4 allowed
$l = ratelimit_acquire('top-held', 100, 60, 1);
for ($i = 0; $i < 4; $i++) ratelimit_acquire('top-held', 100, 86400, 1);   // 4 inflight (slow: no refill between the calls)
$top = ratelimit_top();
echo "listed: ", count($top), "\n";
foreach ($top as $i => $b) {
    printf("%d: denied=%d rate=%d inflight=%d allowed=%d live=%d tokens=%.3f pseudonym=%s\n", $i, $b['denied'],
        $b['denied_rate'], $b['denied_inflight'], $b['allowed'], $b['live_leases'], $b['tokens'],
        preg_match('/^[0-9a-f]{32}$/', $b['pseudonym']) ? 'hex32' : $b['pseudonym']);
}
$hot = $top[0];
echo "keys: ", implode(',', array_keys($hot)), "\n";
echo "types: ", implode(',', array_map('get_debug_type', $hot)), "\n";
echo "full_at one hour after the admission: ", var_export(abs($hot['full_at'] - $hot['stamp'] - 3600) < 0.01, true), "\n";
echo "stamp and used_at now: ", var_export(abs($hot['stamp'] - $t0) < 30 && abs($hot['used_at'] - $t0) < 30, true), "\n";
$s = ratelimit_stats();
echo "every denial listed once: ", var_export(array_sum(array_column($top, 'denied')) === $s['denied_rate'] + $s['denied_inflight'], true), "\n";
echo "distinct pseudonyms: ", count(array_unique(array_column($top, 'pseudonym'))), "\n";
echo "no subject: ", var_export(!str_contains(json_encode($top), 'top-'), true), "\n";
echo "n=2: ", json_encode(array_column(ratelimit_top(2), 'denied')), "\n";
echo "n=1 named: ", json_encode(array_column(ratelimit_top(n: 1), 'denied')), "\n";

// Denials decided from snapshots are written into their bucket's row by this process's next
// write (here: the flush at its end, or a second later); another process then sees them too.
rl_pause(1.1);
ratelimit_stats();
$r = rl_run([], 'echo json_encode(array_map(fn($b) => [$b["pseudonym"], $b["denied"]], ratelimit_top(10))), "\n";');
echo "another process sees the same: ", var_export(trim($r['out']) === json_encode(array_map(fn($b) => [$b['pseudonym'], $b['denied']], $top)), true), "\n";
ratelimit_reset('top-hammering');
echo "after reset: ", json_encode(array_column(ratelimit_top(), 'denied')), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('top');
?>
--EXPECT--
empty: []
listed: 3
0: denied=6 rate=6 inflight=0 allowed=1 live=0 tokens=0.000 pseudonym=hex32
1: denied=4 rate=0 inflight=4 allowed=1 live=1 tokens=99.000 pseudonym=hex32
2: denied=2 rate=2 inflight=0 allowed=1 live=0 tokens=0.000 pseudonym=hex32
keys: pseudonym,tokens,stamp,full_at,used_at,denied,denied_rate,denied_inflight,allowed,live_leases
types: string,float,float,float,float,int,int,int,int,int
full_at one hour after the admission: true
stamp and used_at now: true
every denial listed once: true
distinct pseudonyms: 3
no subject: true
n=2: [6,4]
n=1 named: [6]
another process sees the same: true
after reset: [4,2]
