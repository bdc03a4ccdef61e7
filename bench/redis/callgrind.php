<?php
// The loop bench/redis/callgrind measures: php callgrind.php PEER N URL
// 200 warm-up calls, then N, round-robin over SUBJECTS (100) subjects, a limit never reached
// (every call a round trip). PEER: module or script (ratelimit_acquire, the extension configured
// by the caller's -d options, on a server with the module or a plain one; binary: the same with
// ratelimit.redis_value_form=binary), floor (EVALSHA of
// `return 1` with one key, phpredis), peer (bench/redis/lib.php's phpredis + Lua token bucket),
// raw (RL.ACQUIRE's short form sent by phpredis: the server's side without our client). With
// CHECK=1 in the environment, prints ratelimit_stats()['redis_path'] after the warm-up.
declare(strict_types=1);
[, $peer, $n, $url] = $argv + [null, 'module', '1000', 'redis://127.0.0.1:6379/0'];
$n = (int) $n;
$count = (int) (getenv('SUBJECTS') ?: 100);
$subjects = array_map(fn ($i) => "user-$i", range(0, $count - 1));
require_once __DIR__ . '/lib.php'; // PEER_LUA
if ($peer === 'module' || $peer === 'script' || $peer === 'binary') {
    $call = fn (string $s) => ratelimit_acquire($s, limit: 1000000000, per: 60.0);
} else {
    $u = parse_url($url);
    $r = new Redis();
    $r->connect($u['host'], $u['port']);
    $sha = $r->script('load', 'return 1');
    $peerSha = $r->script('load', PEER_LUA);
    $call = match ($peer) {
        'floor' => fn (string $s) => $r->evalSha($sha, ['f:' . md5($s, true)], 1),
        'peer' => fn (string $s) => $r->evalSha($peerSha, ['p:' . md5($s, true), '1000000000', '60000', '1'], 1),
        'raw' => fn (string $s) => $r->rawCommand('RL.ACQUIRE', '1', 'rl:{' . md5($s) . '}b:' . md5("b$s"), '', '1000000000', '60000', '1'),
    };
}
for ($i = 0; $i < 200; $i++) {
    $call($subjects[$i % $count]);
}
if (getenv('CHECK') && ($peer === 'module' || $peer === 'script')) {
    fwrite(STDERR, 'redis_path: ' . (ratelimit_stats()['redis_path'] ?? '?') . "\n");
}
for ($i = 0; $i < $n; $i++) {
    $call($subjects[$i % $count]);
}
