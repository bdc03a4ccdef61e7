<?php
// The loop bench/redis/luacost measures: php luacost.php PORT N PIECE
// EVALSHA of one piece of Lua N times with the same key and arguments (phpredis). Each piece is
// one thing a token bucket in Lua does; bench/redis/luacost prints what each costs the server
// beside `noop`.
declare(strict_types=1);
[, $port, $n, $piece] = $argv;
$value = '999000 1796222011643 1796222017643 1796222011643 12345 678 9';
$binary = pack('q7', 999000, 1796222011643, 1796222017643, 1796222011643, 12345, 678, 9);
const PIECES = [
    'noop' => "return 1",
    'time' => "local t = redis.call('TIME') return 1",
    'get' => "local v = redis.call('GET', KEYS[1]) return 1",
    'set_px' => "redis.call('SET', KEYS[1], ARGV[1], 'PX', '60000') return 1",
    'match_7_fields' => "local t, s, a, d, i = string.match(ARGV[1], '^(%d+) (%-?%d+) %-?%d+ %-?%d+ (%d+) (%d+) (%d+)$') return 1",
    'tonumber_2' => "local t, s = tonumber(ARGV[2]), tonumber(ARGV[3]) return 1",
    'arith_2' => "local t, s = ARGV[2] + 0, ARGV[3] + 0 return 1",
    'format_4' => "local x = string.format('%d %d %d %d ', 999000, 1796222011643, 1796222017643, 1796222011643) return 1",
    'unpack_7' => "local a, b, c, d, e, f, g = struct.unpack('<i8i8i8i8i8i8i8', ARGV[5]) return 1",
    'pack_7' => "local x = struct.pack('<i8i8i8i8i8i8i8', 999000, 1796222011643, 1796222017643, 1796222011643, 12345, 678, 9) return 1",
    'reply_2' => "return {0, 999000}",
    'reply_6' => "return {0, 999000, 1796222011643, 0, 1796222011643, 0}",
];
if ($piece === 'list') {
    echo implode(' ', array_keys(PIECES)), "\n";
    exit(0);
}
$r = new Redis();
$r->connect('127.0.0.1', (int) $port);
$r->set('k', $value);
$sha = $r->script('load', PIECES[$piece]);
for ($i = 0; $i < (int) $n; $i++) {
    $r->evalSha($sha, ['k', $value, '999000', '1796222011643', '12345', $binary], 1);
}
