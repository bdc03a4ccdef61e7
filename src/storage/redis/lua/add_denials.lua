-- Adds rate denials answered by a worker's deny cache to the bucket's own count (for
-- ratelimit_top), keeping its expiry. KEYS[1] the bucket; ARGV[1] how many. A bucket gone
-- since (expired: full again), or damaged, takes nothing.
local t, s, f, u, a, d, i, k, pv, binary = parse_bucket(get_bucket(KEYS[1]))
if not t then
  return 0
end
redis.call('SET', KEYS[1],
  format_bucket(t, s, f, u, { a, d + tonumber(ARGV[1]), i }, k, pv, binary), 'KEEPTTL')
return 1
