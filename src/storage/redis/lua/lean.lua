-- The lean acquire (issue 24): a plain call (no in-flight slot, no request id) as a Redis
-- Function, loaded once per server by `function.rs` after bucket.lua, which is read once at
-- FUNCTION LOAD: its helpers are not rebuilt on every call as an EVALSHA script's are.
--
-- keys[1] the bucket; args: now ('' = the server's TIME), limit, per_ms, cost, then '1' for a
-- shadow scope and the policy's code (both optional, '0' when left out): what acquire.lua's
-- short form takes.
-- Stores exactly what acquire.lua stores (same value, same expiry), so that hosts on either
-- path, and on the module, share every bucket.
-- Returns the state the decision left, not its derived numbers: { reason (0 ok, 1 rate),
-- milli-tokens, stamp, previous window, now, flags (1 dry run, 4 clock regressed) }; the
-- caller computes remaining, retry_after, reset_after and next_token from them with the core
-- (`core::decision::standing`), on the server's clock as passed back in `now`.
local function lean_acquire(keys, args)
  local key = keys[1]
  local now = now_ms(args[1])
  local p = policy(tonumber(args[2]), tonumber(args[3]), tonumber(args[6] or '0'))
  local cost = tonumber(args[4]) * MILLI

  local stored, counts = full(p, now), { 0, 0, 0 }
  local t, s, _, _, a, d, i, k, pv = parse_bucket(get_bucket(key))
  if t == false then
    damaged(key, p, now)
  end
  if t then
    stored, counts = bucket(t, s, pv, k), { a, d, i }
  end
  local b, regressed = refill(p, stored, now)

  local reason = 0
  if available(p, b, now) < cost then
    reason = 1
  else
    take(p, b, cost, now)
  end
  counts[reason + 1] = counts[reason + 1] + 1
  local full_again = full_at(p, b)
  redis.call('SET', key, format_bucket(b.tokens, b.stamp, full_again, now, counts, b.kind, b.prev),
    'PX', int(math.max(0, full_again - now) + 1000))

  local flags = 0
  if reason ~= 0 and args[5] == '1' then
    flags = 1
  end
  if regressed then
    flags = flags + 4
  end
  return { reason, b.tokens, b.stamp, b.prev, now, flags }
end

redis.register_function('RL_FN_NAME', lean_acquire)
