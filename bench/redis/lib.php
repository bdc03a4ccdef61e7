<?php
// The Redis peers of bench/redis/run, shared by single.php, contend.php and www/*.php.
//
// Options ($o): limit, per (seconds), key (32 bytes), cluster (bool), port (single) or seeds
// (cluster: ["127.0.0.1:P", ...]), persistent (pconnect, under FPM).
//   floor      EVALSHA of `return 1` with one key (the subject's): one round trip, nothing decided
//   peer       a careful PHP token bucket: phpredis + one Lua script (below)
//   ratelimit  ratelimit_acquire() with ratelimit.backend=redis (php.ini, set by bench/redis/run)
//   module     the same, on a server with the native commands (ratelimit_stats()['redis_path'])
declare(strict_types=1);
require_once __DIR__ . '/../lib/common.php';  // bench_subject(), q_sorted()

const REDIS_PEERS = [
    'floor' => '*floor: EVALSHA `return 1` from PHP (phpredis)*',
    'peer' => 'PHP token bucket: phpredis + one Lua script',
    'ratelimit' => '**ratelimit** (backend=redis)',
    'module' => '**ratelimit**, native commands (`--loadmodule libratelimit_redis.so`)',
];

/**
 * The careful developer's token bucket, one script, one round trip. The state is integers only:
 * the level in units of 1/(limit * per_ms) of the bucket, i.e. capacity limit * per_ms units,
 * refilled by `limit` units a millisecond, a token costs per_ms units; exact while
 * 2 * limit * per_ms < 2^53 (Lua numbers are doubles), which the PHP side checks. Time is the
 * server's (TIME), so the hosts' clocks do not matter; a clock that goes back mints nothing.
 * Numbers go back to Redis through string.format('%d'): tostring() of a Lua number keeps only
 * 14 significant digits. The expiry is set in the same script: when the bucket would be full.
 * KEYS[1] bucket; ARGV: limit, per_ms, cost. Returns {allowed, level_units}.
 */
const PEER_LUA = <<<'LUA'
local limit, per, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = limit * per
local s = redis.call('HMGET', KEYS[1], 'u', 't')
local u, ts = tonumber(s[1]), tonumber(s[2])
if u == nil or ts == nil then
  u, ts = cap, now
elseif now > ts then
  local dt = now - ts
  if dt >= per then u = cap else u = math.min(cap, u + dt * limit) end
  ts = now
end
local need = cost * per
local ok = 0
if u >= need then
  u = u - need
  ok = 1
end
redis.call('HSET', KEYS[1], 'u', string.format('%d', u), 't', string.format('%d', ts))
local ttl = math.ceil((cap - u) / limit)
if ttl < 1 then ttl = 1 end
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return {ok, string.format('%d', u)}
LUA;

const FLOOR_LUA = 'return 1';

/** A connection as the peer would keep it: one per process (pconnect under FPM). */
function redis_connect(array $o): Redis|RedisCluster
{
    $persistent = (bool) ($o['persistent'] ?? false);
    if (!empty($o['cluster'])) {
        return new RedisCluster(null, $o['seeds'], 1.0, 1.0, $persistent);
    }
    $r = new Redis();
    $ok = $persistent ? $r->pconnect('127.0.0.1', (int) $o['port'], 1.0) : $r->connect('127.0.0.1', (int) $o['port'], 1.0);
    if (!$ok) {
        throw new RuntimeException("cannot connect to 127.0.0.1:{$o['port']}");
    }
    $r->setOption(Redis::OPT_READ_TIMEOUT, 1.0);
    return $r;
}

/** EVALSHA, and EVAL once if the server does not have the script (NOSCRIPT: a restart, a new node). */
function redis_script(Redis|RedisCluster $r, string $lua, string $sha, array $keys, array $args): mixed
{
    $a = array_merge($keys, $args);
    $res = $r->evalSha($sha, $a, count($keys));
    $err = $r->getLastError();
    if ($err !== null && str_starts_with($err, 'NOSCRIPT')) {
        $r->clearLastError();
        $res = $r->eval($lua, $a, count($keys));
        $err = $r->getLastError();
    }
    if ($err !== null) {
        $r->clearLastError();
        throw new RuntimeException("redis: $err");
    }
    return $res;
}

/** @return object with acquire(string): bool */
function redis_peer(string $name, array $o): object
{
    switch ($name) {
        case 'floor':
            return new class ($o) {
                private Redis|RedisCluster $r;
                private string $sha;

                public function __construct(array $o)
                {
                    $this->r = redis_connect($o);
                    $this->sha = sha1(FLOOR_LUA);
                }

                public function acquire(string $subject): bool
                {
                    // One key, so that a cluster routes it like a bucket of that subject.
                    return redis_script($this->r, FLOOR_LUA, $this->sha, ['f:' . md5($subject, true)], []) === 1;
                }
            };
        case 'peer':
            return new class ($o) {
                private Redis|RedisCluster $r;
                private string $sha;
                private int $perMs;

                public function __construct(private array $o)
                {
                    $this->perMs = (int) round($o['per'] * 1000);
                    if ($this->perMs < 1 || $o['limit'] < 1 || $o['limit'] * $this->perMs >= 2 ** 52) {
                        throw new InvalidArgumentException('limit * per (ms) must stay below 2^52 (level + refill below 2^53) for exact Lua arithmetic');
                    }
                    $this->r = redis_connect($o);
                    $this->sha = sha1(PEER_LUA);
                }

                public function acquire(string $subject): bool
                {
                    // The subject as 16 bytes of HMAC-SHA256, never in clear.
                    $k = 'pb:' . substr(hash_hmac('sha256', $subject, $this->o['key'], true), 0, 16);
                    $res = redis_script($this->r, PEER_LUA, $this->sha, [$k], [$this->o['limit'], $this->perMs, 1]);
                    return is_array($res) && $res[0] === 1;
                }
            };
        case 'ratelimit':
        case 'module':
            if (!function_exists('ratelimit_acquire')) {
                throw new RuntimeException('the ratelimit extension is not loaded');
            }
            $st = ratelimit_stats();
            // bench/redis/run also checks that the keys of the decisions are in Redis afterwards.
            if (array_key_exists('backend', $st) && $st['backend'] !== 'redis') {
                throw new RuntimeException('ratelimit_stats()["backend"] is ' . var_export($st['backend'], true)
                    . ', not "redis": ratelimit.backend is not redis');
            }
            // The path measured must be the one named: the module's commands, or the scripts.
            $path = $st['redis_path'] ?? null;
            if (($name === 'module' || $path !== null) && $path !== ($name === 'module' ? 'module' : 'script')) {
                throw new RuntimeException("ratelimit_stats()[\"redis_path\"] is " . var_export($path, true)
                    . ' for the peer ' . $name);
            }
            return new class ($o['limit'], $o['per']) {
                public int $unavailable = 0;
                public array $sources = [];

                public function __construct(private int $limit, private float $per)
                {
                }

                public function acquire(string $subject): bool
                {
                    $d = ratelimit_acquire($subject, limit: $this->limit, per: $this->per);
                    if ($d->reason === 'unavailable') {
                        $this->unavailable++;
                    }
                    $src = $d->source ?? 'none';
                    $this->sources[$src] = ($this->sources[$src] ?? 0) + 1;
                    return $d->allowed;
                }
            };
    }
    throw new InvalidArgumentException("unknown peer $name");
}
