-- Records the key's fingerprint (Store::record_key) only if the one recorded is still the
-- expected one. KEYS[1] the keyring hash (f fingerprint hex, p key file path);
-- ARGV: expected fingerprint ('' = none recorded), new fingerprint, new path.
local f = redis.call('HGET', KEYS[1], 'f') or ''
if f ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'f', ARGV[2], 'p', ARGV[3])
return 1
