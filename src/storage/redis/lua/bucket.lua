-- The bucket arithmetic of src/core/bucket.rs, exact in Lua's doubles.
--
-- Lua numbers are doubles, exact for integers below 2^53. The core's bounds keep every value
-- this file stores or returns below 2^50 (capacity <= 10^12 * 1000 < 2^50, per <= 10^12 < 2^40,
-- time stamps ~ 2^41), but two products do not fit: elapsed * capacity and milli * per. Both
-- go through muldiv, which never forms a value of 2^53 or more (the proof is beside it).
-- Integers are written back with string.format('%d'), never as Lua numbers (which Redis would
-- print with 14 significant digits).

local MILLI = 1000

local function int(x)
  return string.format('%d', x)
end

-- floor(x / y) and x mod y, for integers 0 <= x < 2^53 and 1 <= y < 2^51, without trusting the
-- rounded quotient: the estimate is off by at most one, and x - q * y (exact while
-- q * y <= x + y < 2^53) says which way.
local function divmod(x, y)
  local q = math.floor(x / y)
  local r = x - q * y
  if r < 0 then
    q, r = q - 1, r + y
  elseif r >= y then
    q, r = q + 1, r - y
  end
  return q, r
end

-- floor(a * b / c) and (a * b) mod c, for integers 0 <= a <= c < 2^50 and 0 <= b < 2^50.
-- Otherwise, with b = q * c + r: a * b / c = a * q + a * r / c, where a * q <= b < 2^50. The second term
-- goes through a digit by digit in base 4 (a < 2^50: 25 digits), keeping rem < c, so that
-- rem * 4 + digit * r < 4c + 3c < 2^53; each quotient digit is at most 6, and the quotient so
-- far never exceeds the final one, which is below a.
local function muldiv(a, b, c)
  -- The common case: the product itself is exact (a rounded product of 2^53 or more means
  -- the true one is too, since rounding is monotonic and 2^53 is a double).
  local p = a * b
  if p < 2 ^ 53 then
    return divmod(p, c)
  end
  local q, r = divmod(b, c)
  local whole = a * q
  local quo, rem, rest, unit = 0, 0, a, 2 ^ 48
  while unit >= 1 do
    local d = math.floor(rest / unit) -- exact: dividing by a power of two; d <= 3
    rest = rest - d * unit
    local qd
    qd, rem = divmod(rem * 4 + d * r, c)
    quo = quo * 4 + qd
    unit = unit / 4
  end
  return whole + quo, rem
end

-- A policy: limit tokens per `per` milliseconds, in milli-tokens.
local function policy(limit, per)
  return { cap = limit * MILLI, per = per }
end

-- Policy::earned: whole milli-tokens earned in `elapsed` ms, at most one full bucket. From
-- elapsed >= per on, a full bucket is earned, so muldiv only sees elapsed < per.
local function earned(p, elapsed)
  if elapsed >= p.per then
    return p.cap
  end
  local e = muldiv(elapsed, p.cap, p.per)
  return math.min(e, p.cap)
end

-- Policy::time_to_earn: ms to earn `milli` (<= cap) milli-tokens, rounded up.
local function time_to_earn(p, milli)
  local q, rem = muldiv(milli, p.per, p.cap)
  if rem > 0 then
    q = q + 1
  end
  return q
end

-- Bucket::refill: the bucket { tokens, stamp } credited up to `now`, and whether the clock was
-- seen going backwards (then nothing is earned and the stamp stays).
local function refill(p, b, now)
  local tokens = math.min(b.tokens, p.cap)
  if now < b.stamp then
    return { tokens = tokens, stamp = b.stamp }, true
  end
  local e = earned(p, now - b.stamp)
  if tokens + e >= p.cap then
    return { tokens = p.cap, stamp = now }, false
  end
  return { tokens = tokens + e, stamp = b.stamp + time_to_earn(p, e) }, false
end

-- Bucket::wait_for: ms from `now` until the bucket holds `milli` milli-tokens.
local function wait_for(p, b, milli, now)
  if b.tokens >= milli then
    return 0
  end
  return math.max(0, b.stamp + time_to_earn(p, milli - b.tokens) - now)
end

local function whole_tokens(b)
  local q = divmod(b.tokens, MILLI)
  return q
end

local function wait_for_next_token(p, b, now)
  if b.tokens >= p.cap then
    return 0
  end
  return wait_for(p, b, (whole_tokens(b) + 1) * MILLI, now)
end

-- Bucket::full_at: from when the bucket is full again.
local function full_at(p, b)
  return b.stamp + time_to_earn(p, p.cap - b.tokens)
end

-- The time of the decision: the server's clock, unless the caller passed its own (a server
-- that refuses TIME in scripts, or a test's manual clock).
local function now_ms(given)
  if given ~= '' then
    return tonumber(given)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A stored bucket, one string (one GET, one SET with its expiry): milli-tokens, stamp, full
-- again at, last decision, then its allowed, rate-denied and inflight-denied counts.
local function format_bucket(tokens, stamp, full, used, counts)
  return string.format('%d %d %d %d %d %d %d', tokens, stamp, full, used, counts[1], counts[2],
    counts[3])
end

-- The fields of a stored bucket, as format_bucket wrote them: milli-tokens, stamp, full again
-- at, last decision, allowed, rate-denied, inflight-denied. nil when there is none; false for a
-- value ratelimit did not write (a damaged store: see `damaged`).
local function parse_bucket(v)
  if not v then
    return nil
  end
  local t, s, f, u, a, d, i = string.match(v, '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)$')
  if not t then
    return false
  end
  return tonumber(t), tonumber(s), tonumber(f), tonumber(u), tonumber(a), tonumber(d), tonumber(i)
end

-- A value of another type at one of our names (a hash, a list, a set: another tenant of a shared
-- Redis) fails every command with WRONGTYPE. The first command on each name goes through pcall,
-- so that such a value is damaged as a string ratelimit did not write is: replaced, and the call
-- fails as damaged (RLCORRUPT), never as a fault of the server.
local function wrongtype(r)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'WRONGTYPE', 1, true) then
      return true
    end
    error(r)
  end
  return false
end

-- The value at a bucket's name: '' (damaged, see parse_bucket) when it is not a string.
local function get_bucket(key)
  local v = redis.pcall('GET', key)
  if wrongtype(v) then
    return ''
  end
  return v
end

-- Runs the first command on a name that must hold `what` (leases, a request's record) or
-- nothing: a value of another type is deleted and the call fails as damaged.
local function first_on(what, key, ...)
  local r = redis.pcall(...)
  if wrongtype(r) then
    redis.call('DEL', key)
    error({ err = 'RLCORRUPT a value at a name of ' .. what .. ' ratelimit did not write, deleted' })
  end
  return r
end

-- A damaged bucket is never read as a full one. It is replaced by an empty bucket stamped now
-- (which refills as the policy allows, so the service resumes by itself), and the call fails:
-- "unavailable", a denial.
local function damaged(key, p, now)
  redis.call('SET', key, format_bucket(0, now, now + p.per, now, { 0, 0, 0 }), 'PX',
    int(p.per + 1000))
  error({ err = 'RLCORRUPT a bucket value ratelimit did not write, replaced by an empty bucket' })
end
