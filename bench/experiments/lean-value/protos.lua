-- Prototype token buckets for bench/experiments/lean-value, appended to bucket.lua and
-- lean.lua (whose lean_acquire is `cur`, the Function as it is): the same arithmetic and
-- arguments, another stored value. Each assumes a value of its form is there (seeded by
-- drive.php); they decide nothing for ratelimit.

-- The fields of cur's fast path, written and read as 7 binary numbers (bucket.lua's binary
-- form): the counts kept in the value.
local function bin7(keys, args)
  local now = now_ms(args[1])
  local limit, per = args[2] + 0, args[3] + 0
  local cost, cap = args[4] * MILLI, limit * MILLI
  local _, tokens, stamp, _, _, a, d, i = struct.unpack(BINARY_7, redis.call('GET', keys[1]))
  tokens = math.min(tokens, cap)
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
    reason, d = 1, d + 1
    if args[5] == '1' then
      flags = 1
    end
  else
    tokens, a = tokens - cost, a + 1
  end
  local full_again = stamp + time_to_earn_by(cap, per, cap - tokens)
  redis.call('SET', keys[1], struct.pack(BINARY_7, BINARY_MARK, tokens, stamp, full_again, now, a, d, i),
    'PX', int(math.max(0, full_again - now) + 1000))
  if regressed then
    flags = flags + 4
  end
  return { reason, tokens, stamp, 0, now, flags }
end

-- Only milli-tokens and stamp, in binary (`bin2`) or text (`txt2`): the counts kept elsewhere.
local function two(keys, args, read, write)
  local now = now_ms(args[1])
  local limit, per = args[2] + 0, args[3] + 0
  local cost, cap = args[4] * MILLI, limit * MILLI
  local tokens, stamp = read(redis.call('GET', keys[1]))
  tokens = math.min(tokens, cap)
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
  redis.call('SET', keys[1], write(tokens, stamp), 'PX', int(math.max(0, full_again - now) + 1000))
  if regressed then
    flags = flags + 4
  end
  return { reason, tokens, stamp, 0, now, flags }
end

local function bin2_read(v)
  return struct.unpack('<i8i8', v)
end
local function bin2_write(t, s)
  return struct.pack('<i8i8', t, s)
end
local function txt2_read(v)
  local t, s = string.match(v, '^(%d+) (%-?%d+)$')
  return t + 0, s + 0
end
local function txt2_write(t, s)
  return string.format('%d %d', t, s)
end

redis.register_function('bin7', bin7)
redis.register_function('bin2', function(keys, args) return two(keys, args, bin2_read, bin2_write) end)
redis.register_function('txt2', function(keys, args) return two(keys, args, txt2_read, txt2_write) end)
-- TIME, GET and SET .. PX, nothing decided: what no Lua token bucket gets under.
redis.register_function('tgs', function(keys, args)
  redis.call('TIME')
  redis.call('SET', keys[1], redis.call('GET', keys[1]), 'PX', '60000')
  return 1
end)
