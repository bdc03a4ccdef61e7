-- Adds rate denials answered by a worker's deny cache to the bucket's own count (for
-- ratelimit_top), keeping its expiry. KEYS[1] the bucket; ARGV[1] how many. A bucket gone
-- since (expired: full again) takes nothing.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local t, s, f, u, a, d, i = string.match(v, '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)$')
if not t then
  return 0
end
local counts = { tonumber(a), tonumber(d) + tonumber(ARGV[1]), tonumber(i) }
redis.call('SET', KEYS[1], format_bucket(tonumber(t), tonumber(s), tonumber(f), tonumber(u), counts),
  'KEEPTTL')
return 1
