-- Records the key's fingerprint (Store::record_key) only if the one recorded is still the
-- expected one. KEYS[1] the keyring hash (f fingerprint hex, p key file path, h host, v the
-- fingerprint it replaced or '', s ms first recorded); ARGV: expected fingerprint ('' = none
-- recorded), then f, p, h, v, s ('now': the server's TIME, so that no host's clock decides
-- which key is older). A hash whose f is not a fingerprint (not written by ratelimit) counts as
-- none recorded, and so does a value of another type (replaced).
local f = redis.pcall('HGET', KEYS[1], 'f')
if type(f) ~= 'string' then
  f = ''
end
if #f ~= 32 or f:find('[^0-9a-fA-F]') then
  f = ''
end
if f ~= ARGV[1] then
  return 0
end
local s = ARGV[6]
if s == 'now' then
  local t = redis.call('TIME')
  s = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'f', ARGV[2], 'p', ARGV[3], 'h', ARGV[4], 'v', ARGV[5], 's', s)
return 1
