-- Adds a process's batched counts to the shared counters. KEYS[1] the counters hash;
-- ARGV: name, count, name, count, ... (a script: a cluster connection has no pipelines).
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
