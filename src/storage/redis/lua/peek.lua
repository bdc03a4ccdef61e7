-- What Store::peek needs, read-only: the bucket's milli-tokens and stamp (false when missing),
-- the time, its policy's code and its previous window's milli-tokens. The arithmetic is the
-- core's own, in Rust.
-- KEYS[1] the bucket; ARGV[1] now ('' = the server's TIME).
local t, s, _, _, _, _, _, k, pv = parse_bucket(get_bucket(KEYS[1]))
if t == false then
  -- Read-only: the next decision replaces it (see `damaged`).
  error({ err = 'RLCORRUPT a bucket value ratelimit did not write' })
end
if t then
  return { int(t), int(s), int(now_ms(ARGV[1])), k, int(pv) }
end
return { false, false, int(now_ms(ARGV[1])), 0, '0' }
