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
-- A token bucket kept as one (7 fields, in either form of bucket.lua's `format_bucket`), as
-- most are: refilled, checked, taken and written with numbers only (no tables), as bucket.lua's
-- `refill`, `available`, `take` and `full_at` compute it; anything else (a window, a policy
-- change, a damaged value) goes the general way.

local function lean_acquire(keys, args)
  local key = keys[1]
  local now = now_ms(args[1])
  -- Numbers by arithmetic (`x + 0`): tonumber() reads a string twice (lua_isnumber, then
  -- lua_tonumber), each time by strtod.
  local limit, per, code = args[2] + 0, args[3] + 0, args[6]
  local cost = args[4] * MILLI
  local v = get_bucket(key)

  -- The fast path, inline (a Lua call with these arguments cost some 3,000 instructions,
  -- bench/experiments/lean-value); `break` leaves it for the general way. A token bucket's code
  -- is '0' or left out. In text, the counts are carried as the strings they are, but the one
  -- that grows: each number read (strtod) or written (sprintf) costs the server some 500 to 900
  -- instructions (bench/redis/callgrind). In binary, they are read and written by struct, the
  -- ranges checked as bucket.lua's `in_range` does.
  repeat
    if not v or (code ~= nil and tonumber(code) ~= TOKEN_BUCKET) then
      break
    end
    local cap, binary = limit * MILLI, false
    local t, s, f, u, a, d, i
    -- Binary first: a length compared costs a text value nothing it notices; a failed match
    -- would cost a binary one more.
    if #v == 57 and string.byte(v, 1) == 1 then
      local _
      _, t, s, f, u, a, d, i = struct.unpack(BINARY_7, v)
      local max = MAX_STORED
      if t < 0 or t > max or s < -MAX_BOOKED or s > MAX_BOOKED or f < -max or f > max or u < -max
        or u > max or a < 0 or a > max or d < 0 or d > max or i < 0 or i > max then
        break
      end
      binary = true
    else
      t, s, f, u, a, d, i = string.match(v,
        '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)$')
      if not t then
        break
      end
      -- Counts carried as read only in the form they are written (no leading zero, exact in a
      -- double: at most 15 digits); any other goes the general way, which writes them anew.
      -- Numbers of 15 characters or fewer are within `in_range`'s bounds; longer ones go the
      -- general way too, which checks them.
      if #a > 15 or #d > 15 or #i > 15 or #t > 15 or #s > 15 or #f > 15 or #u > 15
        or (#a > 1 and a:byte() == 48) or (#d > 1 and d:byte() == 48)
        or (#i > 1 and i:byte() == 48) then
        break
      end
      t, s = t + 0, s + 0
    end
    local tokens, stamp = math.min(t, cap), s
    local regressed = now < stamp
    if not regressed then
      local e = earned_by(cap, per, now - stamp)
      if tokens + e >= cap then
        tokens, stamp = cap, now
      else
        tokens, stamp = tokens + e, stamp + time_to_earn_by(cap, per, e)
      end
    end
    local reason, flags = 0, 0
    if tokens < cost then
      reason = 1
      if args[5] == '1' then
        flags = 1
      end
    else
      tokens = tokens - cost
    end
    local full_again = stamp + time_to_earn_by(cap, per, cap - tokens)
    local value
    if binary then
      if reason == 0 then
        a = math.min(a + 1, MAX_STORED)
      else
        d = math.min(d + 1, MAX_STORED)
      end
      value = struct.pack(BINARY_7, BINARY_MARK, tokens, stamp, full_again, now, a, d, i)
    else
      local counts
      if reason == 0 then
        counts = string.format('%d', a + 1) .. ' ' .. d
      else
        counts = a .. ' ' .. string.format('%d', d + 1)
      end
      value = string.format('%d %d %d %d ', tokens, stamp, full_again, now) .. counts .. ' ' .. i
    end
    redis.call('SET', key, value, 'PX', int(math.max(0, full_again - now) + 1000))
    if regressed then
      flags = flags + 4
    end
    return { reason, tokens, stamp, 0, now, flags }
  until true

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
