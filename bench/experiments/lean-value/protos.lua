-- Prototype token buckets for bench/experiments/lean-value, appended to bucket.lua and
-- lean.lua (whose lean_acquire is `cur`, the Function as it is): the same arithmetic and
-- arguments, another stored value. Each assumes a value of its form is there (seeded by
-- drive.php); they decide nothing for ratelimit.

-- One token bucket, its value read and written by `read` and `write`: the same calls for every
-- prototype, so that they differ by their values alone.
local function proto(keys, args, read, write)
  local now = now_ms(args[1])
  local limit, per = args[2] + 0, args[3] + 0
  local cost, cap = args[4] * MILLI, limit * MILLI
  local tokens, stamp, a, d, i = read(redis.call('GET', keys[1]))
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
  redis.call('SET', keys[1], write(tokens, stamp, full_again, now, reason, a, d, i), 'PX',
    int(math.max(0, full_again - now) + 1000))
  if regressed then
    flags = flags + 4
  end
  return { reason, tokens, stamp, 0, now, flags }
end

-- bin7: the 7 numbers in binary (bucket.lua's binary form), the counts kept in the value.
local function bin7_read(v)
  local _, t, s, _, _, a, d, i = struct.unpack(BINARY_7, v)
  return t, s, a, d, i
end
local function bin7_write(t, s, f, u, reason, a, d, i)
  if reason == 0 then
    a = a + 1
  else
    d = d + 1
  end
  return struct.pack(BINARY_7, BINARY_MARK, t, s, f, u, a, d, i)
end
-- bin2 and txt2: only milli-tokens and stamp, in binary or in text (the counts kept elsewhere).
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

redis.register_function('bin7', function(keys, args)
  return proto(keys, args, bin7_read, bin7_write)
end)
redis.register_function('bin2', function(keys, args)
  return proto(keys, args, bin2_read, bin2_write)
end)
redis.register_function('txt2', function(keys, args)
  return proto(keys, args, txt2_read, txt2_write)
end)
-- TIME, GET and SET .. PX, nothing decided: what no Lua token bucket gets under.
redis.register_function('tgs', function(keys, args)
  redis.call('TIME')
  redis.call('SET', keys[1], redis.call('GET', keys[1]), 'PX', '60000')
  return 1
end)
