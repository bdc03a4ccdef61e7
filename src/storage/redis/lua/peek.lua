-- What Store::peek needs, read-only: the bucket's milli-tokens and stamp (false when missing)
-- and the time. The arithmetic is the core's own, in Rust.
-- KEYS[1] the bucket; ARGV[1] now ('' = the server's TIME).
local h = redis.call('HMGET', KEYS[1], 't', 's')
return { h[1], h[2], int(now_ms(ARGV[1])) }
