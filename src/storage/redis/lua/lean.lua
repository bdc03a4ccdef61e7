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
-- A token bucket kept as one (7 fields), as most are: refilled, checked, taken and written
-- with numbers only (no tables), as bucket.lua's `refill`, `available`, `take` and `full_at`
-- compute it; anything else (a window, a policy change, a damaged value) goes the general way.
-- The counts are carried as the strings they are, but the one that grows: each number read
-- (strtod) or written (sprintf) costs the server some 500 to 900 instructions
-- (bench/redis/callgrind); strings become numbers by arithmetic, as in lean_acquire.
-- Returns nil when the value is not such a bucket.
local function token_bucket(key, v, cap, per, cost, now, dry)
  local t, s, a, d, i = string.match(v, '^(%d+) (%-?%d+) %-?%d+ %-?%d+ (%d+) (%d+) (%d+)$')
  if not t then
    return nil
  end
  -- Counts carried as read only in the form they are written (no leading zero, exact in a
  -- double: at most 15 digits); any other goes the general way, which writes them anew.
  if #a > 15 or #d > 15 or #i > 15 or (#a > 1 and a:byte() == 48) or (#d > 1 and d:byte() == 48)
    or (#i > 1 and i:byte() == 48) then
    return nil
  end
  local tokens, stamp = math.min(t + 0, cap), s + 0
  local regressed = now < stamp
  if not regressed then
    local e = earned_by(cap, per, now - stamp)
    if tokens + e >= cap then
      tokens, stamp = cap, now
    else
      tokens, stamp = tokens + e, stamp + time_to_earn_by(cap, per, e)
    end
  end
  local reason, flags, counts = 0, 0, nil
  if tokens < cost then
    reason = 1
    counts = a .. ' ' .. string.format('%d', d + 1)
    if dry then
      flags = 1
    end
  else
    tokens = tokens - cost
    counts = string.format('%d', a + 1) .. ' ' .. d
  end
  local full_again = stamp + time_to_earn_by(cap, per, cap - tokens)
  redis.call('SET', key, string.format('%d %d %d %d ', tokens, stamp, full_again, now) .. counts ..
    ' ' .. i, 'PX', int(math.max(0, full_again - now) + 1000))
  if regressed then
    flags = flags + 4
  end
  return { reason, tokens, stamp, 0, now, flags }
end

local function lean_acquire(keys, args)
  local key = keys[1]
  local now = now_ms(args[1])
  -- Numbers by arithmetic (`x + 0`): tonumber() reads a string twice (lua_isnumber, then
  -- lua_tonumber), each time by strtod.
  local limit, per, code = args[2] + 0, args[3] + 0, args[6]
  local cost = args[4] * MILLI
  local v = get_bucket(key)
  -- A token bucket's code is '0' or left out.
  if v and (code == nil or tonumber(code) == TOKEN_BUCKET) then
    local r = token_bucket(key, v, limit * MILLI, per, cost, now, args[5] == '1')
    if r then
      return r
    end
  end

  local p = policy(limit, per, tonumber(code or '0'))

  local stored, counts = full(p, now), { 0, 0, 0 }
  local t, s, _, _, a, d, i, k, pv, binary = parse_bucket(v)
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
  redis.call('SET', key, format_bucket(b.tokens, b.stamp, full_again, now, counts, b.kind, b.prev,
    binary), 'PX', int(math.max(0, full_again - now) + 1000))

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
