-- Records the key's fingerprint (Store::record_key) only if the one recorded is still the
-- expected one. KEYS[1] the keyring hash (f fingerprint hex, p key file path, h host, v the
-- fingerprint it replaced or '', s ms first recorded); ARGV: expected fingerprint ('' = none
-- recorded), then f, p, h, v, s.
local f = redis.call('HGET', KEYS[1], 'f') or ''
if f ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'f', ARGV[2], 'p', ARGV[3], 'h', ARGV[4], 'v', ARGV[5], 's', ARGV[6])
return 1
