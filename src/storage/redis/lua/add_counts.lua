-- Adds a process's batched counts to the shared counters. KEYS[1] the counters hash;
-- ARGV: name, count, name, count, ... (a script: a cluster connection has no pipelines).
-- A value of another type there (not written by ratelimit) is replaced by the counts: the
-- counters start again rather than fail every flush.
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  redis.call('DEL', KEYS[1])
end
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
