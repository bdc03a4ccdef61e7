-- Frees one lease (Store::release) if it is still live. KEYS[1] the bucket's leases;
-- ARGV: now ('' = the server's TIME), the lease id (hex). Returns 1 when it was live.
local now = now_ms(ARGV[1])
local e = first_on('leases', KEYS[1], 'ZSCORE', KEYS[1], ARGV[2])
if e and tonumber(e) > now then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
