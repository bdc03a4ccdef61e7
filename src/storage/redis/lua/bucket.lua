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

-- A policy: limit tokens per `per` milliseconds, in milli-tokens, counted as `code` says
-- (core::bucket::Policy::code_arg: 0 token bucket, 1 fixed window, 2 sliding window, and
-- '3:<amount>' a stepped bucket of `amount` tokens per step; a number or nil: its kind alone).
-- `step`: a stepped bucket's milli-tokens per step, at most the capacity.
local TOKEN_BUCKET, FIXED_WINDOW, SLIDING_WINDOW, STEPPED_BUCKET = 0, 1, 2, 3
local function policy(limit, per, code)
  local kind, amount = TOKEN_BUCKET, limit
  if type(code) == 'number' then
    kind = code
  elseif code and code ~= '' then
    local k, a = string.match(code, '^([0-3])(.*)$')
    if not k then
      error({ err = 'ERR an unknown policy code' })
    end
    kind = tonumber(k)
    if kind == STEPPED_BUCKET then
      amount = tonumber(string.match(a, '^:(%d+)$'))
      if not amount or amount < 1 then
        error({ err = 'ERR a stepped bucket without its amount' })
      end
    elseif a ~= '' then
      error({ err = 'ERR an unknown policy code' })
    end
  end
  return { cap = limit * MILLI, per = per, kind = kind, amount = amount,
    step = math.min(amount, limit) * MILLI }
end

-- A bucket of tokens (continuous or stepped), as opposed to a window.
local function is_bucket(kind)
  return kind == TOKEN_BUCKET or kind == STEPPED_BUCKET
end

-- Policy::stepped_ready_at: when `milli` milli-tokens are held, `tokens` held at `stamp`.
-- Never past MAX_BOOKED (a stamp before it): exact, since a product of 2^53 or more rounds to
-- one that is still past it.
local MAX_BOOKED = 2 ^ 52
local function stepped_ready_at(p, tokens, stamp, milli)
  if tokens >= milli then
    return stamp
  end
  local steps, r = divmod(milli - tokens, p.step)
  if r > 0 then
    steps = steps + 1
  end
  local at = stamp + steps * p.per
  if stamp < MAX_BOOKED then
    at = math.min(at, MAX_BOOKED)
  end
  return at
end

-- Policy::earned: whole milli-tokens earned in `elapsed` ms, at most one full bucket. From
-- elapsed >= per on, a full bucket is earned, so muldiv only sees elapsed < per.
-- `earned_by` and `time_to_earn_by` take the policy's numbers, for lean.lua's fast path (no table).
local function earned_by(cap, per, elapsed)
  if elapsed >= per then
    return cap
  end
  local e = muldiv(elapsed, cap, per)
  return math.min(e, cap)
end

local function earned(p, elapsed)
  return earned_by(p.cap, p.per, elapsed)
end

-- Policy::time_to_earn: ms to earn `milli` (<= cap) milli-tokens, rounded up.
local function time_to_earn_by(cap, per, milli)
  local q, rem = muldiv(milli, per, cap)
  if rem > 0 then
    q = q + 1
  end
  return q
end

local function time_to_earn(p, milli)
  return time_to_earn_by(p.cap, p.per, milli)
end

-- Policy::weighted: the previous window's `prev` milli-tokens weighted by the `d` ms (0..per)
-- of it still inside the sliding period, rounded down to whole tokens (Symfony's floor):
-- floor(prev * d / (per * MILLI)) tokens. muldiv: d <= per <= per * MILLI < 2^50, prev <= cap.
local function weighted(p, prev, d)
  d = math.min(d, p.per)
  local tokens = muldiv(d, prev, p.per * MILLI)
  return tokens * MILLI
end

-- Policy::latest_d: the largest d in 0..per with weighted(prev, d) <= room, that is
-- prev * d < k * per * MILLI with k = floor(room / MILLI) + 1. When k * MILLI > prev every d
-- up to per qualifies; otherwise k * MILLI <= prev, and muldiv gives k * MILLI * per = q * prev
-- + r, so the largest d is q, or q - 1 when r = 0.
local function latest_d(p, prev, room)
  if prev == 0 then
    return p.per
  end
  local km = (math.floor(room / MILLI) + 1) * MILLI
  if km > prev then
    return p.per
  end
  local q, r = muldiv(km, p.per, prev)
  if r == 0 then
    q = q - 1
  end
  return math.min(q, p.per)
end

-- A bucket { tokens, stamp, prev, kind }: for a window, tokens are those used in the current
-- window, stamp its start, prev (sliding) those of the previous one (see core::bucket).
local function bucket(tokens, stamp, prev, kind)
  return { tokens = tokens, stamp = stamp, prev = prev or 0, kind = kind or TOKEN_BUCKET }
end

-- Bucket::window_ms: a fixed window lasts the period of the call that started it, kept in
-- prev (0 in a state written before it was kept: the call's); any other policy the call's.
local MAX_PER_MS = 10 ^ 12
local function window_ms(p, b)
  if p.kind == FIXED_WINDOW and b.kind == FIXED_WINDOW and b.prev > 0 then
    return math.min(b.prev, MAX_PER_MS)
  end
  return p.per
end

-- Bucket::full: a limit seen for the first time.
local function full(p, now)
  if is_bucket(p.kind) then
    return bucket(p.cap, now, 0, p.kind)
  end
  return bucket(0, now, 0, p.kind)
end

local available

-- Most milli-tokens a window counts as used (core::bucket::MAX_USED): below 2^50, so that
-- weighted and latest_d stay exact.
local MAX_USED = 2 ^ 50 - 1

-- Bucket::owed: a token bucket's debt at `now` in milli-tokens, rounded up (0 without a
-- booking): ceil((stamp - now) * cap / per), the product split at whole periods for muldiv.
local function owed(p, b, now)
  if b.prev == 0 or b.stamp <= now then
    return 0
  end
  if p.kind == STEPPED_BUCKET then
    -- The steps still to come up to the stamp's, less what it leaves over.
    local steps, r = divmod(b.stamp - now, p.per)
    if r > 0 then
      steps = steps + 1
    end
    -- At most MAX_USED (exact: a product past it stays past it when rounded).
    return math.min(math.max(0, steps * p.step - b.tokens), 2 ^ 50 - 1)
  end
  local n, r = divmod(b.stamp - now, p.per)
  local q, rem = muldiv(r, p.cap, p.per)
  local milli = n * p.cap + q
  if rem > 0 then
    milli = milli + 1
  end
  -- At most MAX_USED, as the core (exact below it; a sum past it stays past it when rounded).
  return math.min(milli, MAX_USED)
end

-- Bucket::in_debt_at: a token bucket booked ahead (see book) and not yet at its stamp, read at
-- or after the booking's decision (`prev` holds that instant).
local function in_debt(p, b, now)
  return is_bucket(p.kind) and b.kind == p.kind and b.prev ~= 0 and now < b.stamp
    and now >= b.prev
end


-- Bucket::refill: the bucket brought up to `now` (earnings credited, ended windows rolled),
-- and whether the clock was seen going backwards (then nothing is earned, no window rolls and
-- the stamp stays). A bucket of another policy is converted first, keeping exactly what it
-- has available.
local function refill(p, b, now)
  if b.kind ~= p.kind then
    local old = policy(p.cap / MILLI, p.per, b.kind)
    old.amount, old.step = p.amount, p.step
    local r, regressed = refill(old, b, now)
    local a = available(old, r, now)
    -- A token bucket in debt: the window starts now and counts the debt past its limit (a
    -- stamp ahead would read as a clock that ran backwards).
    local debt = 0
    if in_debt(old, r, now) then
      debt = owed(old, r, now)
    end
    local stamp = math.max(r.stamp, now)
    if debt > 0 then
      stamp = now
    end
    if is_bucket(p.kind) and debt > 0 then
      -- A debt stays a stamp ahead: nothing before the booked instant under the other bucket.
      return bucket(0, r.stamp, r.prev, p.kind), regressed
    end
    if is_bucket(p.kind) then
      return bucket(a, stamp, 0, p.kind), regressed
    end
    return bucket(math.min(p.cap - a + debt, MAX_USED), stamp, 0, p.kind), regressed
  end
  local regressed = now < b.stamp and not in_debt(p, b, now)
  if p.kind == FIXED_WINDOW then
    if b.tokens == 0 or now >= b.stamp + window_ms(p, b) then
      return bucket(0, math.max(b.stamp, now), 0, p.kind), regressed
    end
    return bucket(b.tokens, b.stamp, b.prev, p.kind), regressed
  elseif p.kind == SLIDING_WINDOW then
    local finish = b.stamp + p.per
    if (b.tokens == 0 and b.prev == 0) or now >= finish + p.per then
      return bucket(0, math.max(b.stamp, now), 0, p.kind), regressed
    elseif now < finish then
      return bucket(b.tokens, b.stamp, b.prev, p.kind), regressed
    elseif b.tokens > 0 then
      return bucket(0, finish, b.tokens, p.kind), regressed
    end
    return bucket(0, now, 0, p.kind), regressed
  elseif p.kind == STEPPED_BUCKET then
    -- Bucket::refill_steps: amount per whole period since the stamp, the stamp moved by those
    -- periods only; found full, it restarts at now.
    local tokens = math.min(b.tokens, p.cap)
    if now < b.stamp then
      return bucket(tokens, b.stamp, b.prev, p.kind), regressed
    end
    local steps = divmod(now - b.stamp, p.per)
    if steps >= p.cap / p.step or tokens + steps * p.step >= p.cap then
      return bucket(p.cap, now, 0, p.kind), false
    end
    return bucket(tokens + steps * p.step, b.stamp + steps * p.per, 0, p.kind), false
  end
  local tokens = math.min(b.tokens, p.cap)
  if now < b.stamp then
    -- Nothing earned before the stamp; a debt keeps its mark (see book).
    return bucket(tokens, b.stamp, b.prev), regressed
  end
  local e = earned(p, now - b.stamp)
  if tokens + e >= p.cap then
    return bucket(p.cap, now), false
  end
  return bucket(tokens + e, b.stamp + time_to_earn(p, e)), false
end

-- Milli-tokens a sliding window counts as used at `now` (before its start: the previous
-- window weighs whole).
local function sliding_used(p, b, now)
  local d = math.max(0, math.min(b.stamp + p.per - now, p.per))
  return b.tokens + weighted(p, b.prev, d)
end

-- Bucket::available: milli-tokens a call could take at `now`.
available = function(p, b, now)
  if p.kind == FIXED_WINDOW then
    return math.max(0, p.cap - b.tokens)
  elseif p.kind == SLIDING_WINDOW then
    return math.max(0, p.cap - sliding_used(p, b, now))
  elseif p.kind == STEPPED_BUCKET and b.prev ~= 0 and now < b.stamp then
    -- Booked: what the stamp's step leaves over is not there before it.
    return 0
  end
  return math.min(b.tokens, p.cap)
end

-- Bucket::take: `milli` milli-tokens taken at `now`; the first of a fresh window starts it.
local function take(p, b, milli, now)
  if is_bucket(p.kind) then
    b.tokens = b.tokens - milli
    return
  end
  if b.tokens == 0 and b.prev == 0 then
    b.stamp = math.max(b.stamp, now)
    if p.kind == FIXED_WINDOW then
      b.prev = p.per
    end
  end
  b.tokens = b.tokens + milli
end

-- Bucket::ready_at: from when `milli` (<= cap) milli-tokens are available if nothing else is
-- taken; any instant not after now means now.
local function ready_at(p, b, milli)
  local finish = b.stamp + window_ms(p, b)
  if p.kind == FIXED_WINDOW then
    if b.tokens + milli <= p.cap then
      return b.stamp
    end
    return finish
  elseif p.kind == SLIDING_WINDOW then
    if b.tokens + milli <= p.cap then
      return math.max(b.stamp, finish - latest_d(p, b.prev, p.cap - b.tokens - milli))
    end
    return math.max(finish, finish + p.per - latest_d(p, b.tokens, math.max(0, p.cap - milli)))
  elseif p.kind == STEPPED_BUCKET then
    return stepped_ready_at(p, b.tokens, b.stamp, milli)
  end
  if b.tokens >= milli then
    return b.stamp
  end
  return b.stamp + time_to_earn(p, milli - b.tokens)
end

-- Bucket::wait_for: ms from `now` until `milli` milli-tokens are available.
local function wait_for(p, b, milli, now)
  if available(p, b, now) >= milli then
    return 0
  end
  return math.max(0, ready_at(p, b, milli) - now)
end

local function whole_tokens(p, b, now)
  local q = divmod(available(p, b, now), MILLI)
  return q
end

local function wait_for_next_token(p, b, now)
  local a = available(p, b, now)
  if a >= p.cap then
    return 0
  end
  local q = divmod(a, MILLI)
  return wait_for(p, b, (q + 1) * MILLI, now)
end

-- Latest instant a booking reaches (core::bucket::MAX_BOOKED): defined above.

-- Bucket::book_wait: ms from `now` until `milli` milli-tokens can be booked (0: now). A
-- window books a cost past its limit once nothing counts any more.
local function book_wait(p, b, milli, now)
  if not is_bucket(p.kind) then
    milli = math.min(milli, p.cap)
  end
  local w = wait_for(p, b, milli, now)
  -- core::bucket::MAX_BOOKED: a debt stops there (exact doubles, a valid expiry).
  if is_bucket(p.kind) and w > 0 and now < MAX_BOOKED then
    w = math.min(w, MAX_BOOKED - now)
  end
  return w
end

-- Bucket::book: `milli` milli-tokens taken, booked `wait` ms after `now`. A token bucket in
-- debt holds nothing until the booked instant (stamp), its prev the latest booking's decision
-- instant; a window counts the booking in the current window, past its limit if need be.
local function book(p, b, milli, wait, now)
  if p.kind == STEPPED_BUCKET and wait > 0 then
    -- The step that pays the booking keeps what it leaves over; nothing is there before.
    local at = now + wait
    local steps = divmod(at - math.min(b.stamp, at), p.per)
    local held = p.cap
    if steps < p.cap / p.step then
      held = math.min(b.tokens + steps * p.step, p.cap)
    end
    b.prev = math.max(math.max(now, 1), b.prev)
    b.tokens, b.stamp = math.max(0, held - milli), at
    return
  end
  if is_bucket(p.kind) then
    if wait > 0 then
      b.prev = math.max(math.max(now, 1), b.prev)
      b.tokens, b.stamp = 0, now + wait
      return
    end
    take(p, b, milli, now)
    return
  end
  take(p, b, 0, now)
  b.tokens = math.min(b.tokens + milli, MAX_USED)
end

-- Bucket::reserved: whole tokens taken ahead and not yet earned back at `now`, rounded up.
local function reserved(p, b, now)
  local milli = 0
  if is_bucket(p.kind) then
    milli = owed(p, b, now)
  elseif p.kind == FIXED_WINDOW then
    milli = math.max(0, b.tokens - p.cap)
  else
    milli = math.max(0, sliding_used(p, b, now) - p.cap)
  end
  local q, rem = divmod(milli, MILLI)
  if rem > 0 then
    q = q + 1
  end
  return q
end

-- Bucket::full_at: from when the bucket is full again (a window: nothing used counts).
local function full_at(p, b)
  if p.kind == STEPPED_BUCKET then
    return ready_at(p, b, p.cap)
  end
  if p.kind == TOKEN_BUCKET then
    return b.stamp + time_to_earn(p, p.cap - b.tokens)
  end
  return ready_at(p, b, p.cap)
end

-- The time of the decision: the server's clock, unless the caller passed its own (a server
-- that refuses TIME in scripts, or a test's manual clock).
local function now_ms(given)
  if given ~= '' then
    return tonumber(given)
  end
  local t = redis.call('TIME')
  -- By arithmetic: tonumber() would read each string twice.
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- A stored bucket, one string (one GET, one SET with its expiry): milli-tokens, stamp, full
-- again at, last decision, then its allowed, rate-denied and inflight-denied counts; then,
-- for a window only, its policy's code and the previous window's milli-tokens (a token bucket
-- is written as before policies existed, so that older builds still read it).
-- Two forms of the same fields (docs/redis.md, "A bucket's stored value"): text, decimal
-- numbers separated by one space; and binary, BINARY_MARK then each number as a little-endian
-- 64-bit integer, read and written by struct instead of string.match and string.format (some
-- 11,000 fewer instructions of the server's per decision, 13%: bench/redis/callgrind, issue
-- 24). In both, each number is `in_range`. A value is written back in the form it was read in;
-- a new bucket in the host's form (NEW_BUCKETS_BINARY), a damaged one's replacement in text,
-- which every build reads.
local BINARY_MARK = '\1'
-- The form of a new bucket: the one line the scripts and the Function of a host with
-- ratelimit.redis_value_form = binary differ by (`bucket_lua` in mod.rs), so that they are other
-- scripts (another SHA) and another library than a text host's.
local NEW_BUCKETS_BINARY = false
local BINARY_7, BINARY_9 = '<c1i8i8i8i8i8i8i8', '<c1i8i8i8i8i8i8i8i8i8'
-- tonumber and struct.unpack give doubles: any integer past this one reads as one past it too
-- (rounding is monotonic and 2^53 a double), so the range checks of `in_range` are exact.
local MAX_STORED = 2 ^ 53 - 1

-- `binary`: the form the bucket was read in (nil: a new bucket).
local function format_bucket(tokens, stamp, full_again, used, counts, kind, prev, binary)
  if binary == nil then
    binary = NEW_BUCKETS_BINARY
  end
  local window = (kind or TOKEN_BUCKET) ~= TOKEN_BUCKET or (prev or 0) ~= 0
  -- A count saturates (a value holds none past MAX_STORED).
  local a, d, i = math.min(counts[1], MAX_STORED), math.min(counts[2], MAX_STORED),
    math.min(counts[3], MAX_STORED)
  if binary then
    if window then
      return struct.pack(BINARY_9, BINARY_MARK, tokens, stamp, full_again, used, a, d, i,
        kind or TOKEN_BUCKET, prev or 0)
    end
    return struct.pack(BINARY_7, BINARY_MARK, tokens, stamp, full_again, used, a, d, i)
  end
  local v = string.format('%d %d %d %d %d %d %d', tokens, stamp, full_again, used, a, d, i)
  if window then
    v = v .. string.format(' %d %d', kind or TOKEN_BUCKET, prev or 0)
  end
  return v
end

-- Whether a stored value's numbers are in the ranges ratelimit writes, in either form: the
-- stamp from -MAX_BOOKED to MAX_BOOKED (the core's latest: past it, the arithmetic in doubles
-- is no longer the core's), the other instants from -MAX_STORED to MAX_STORED, milli-tokens,
-- counts and previous window from 0 to MAX_STORED (a value past them is damaged, never read as
-- a full bucket: the module reads the same).
local function in_range(t, s, f, u, a, d, i, pv)
  local m = MAX_STORED
  return t >= 0 and t <= m and a >= 0 and a <= m and d >= 0 and d <= m and i >= 0 and i <= m
    and pv >= 0 and pv <= m and s >= -MAX_BOOKED and s <= MAX_BOOKED and f >= -m and f <= m
    and u >= -m and u <= m
end

-- A binary value's fields (see format_bucket), or false when it is not one ratelimit wrote:
-- 57 or 73 bytes, its numbers `in_range`, a policy code from 0 to 3.
local function parse_binary(v)
  local _, t, s, f, u, a, d, i, k, pv
  if #v == 57 then
    _, t, s, f, u, a, d, i = struct.unpack(BINARY_7, v)
    k, pv = 0, 0
  elseif #v == 73 then
    _, t, s, f, u, a, d, i, k, pv = struct.unpack(BINARY_9, v)
  else
    return false
  end
  if k < 0 or k > 3 or not in_range(t, s, f, u, a, d, i, pv) then
    return false
  end
  return t, s, f, u, a, d, i, k, pv, true
end

-- The fields of a stored bucket, as format_bucket wrote them: milli-tokens, stamp, full again
-- at, last decision, allowed, rate-denied, inflight-denied, policy code, previous window's
-- milli-tokens, and whether it was binary. nil when there is none; false for a value ratelimit
-- did not write (a damaged store: see `damaged`).
local function parse_bucket(v)
  if not v then
    return nil
  end
  if string.byte(v, 1) == 1 then
    return parse_binary(v)
  end
  local t, s, f, u, a, d, i, rest = string.match(v,
    '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)(.*)$')
  if not t then
    return false
  end
  local k, pv = 0, 0
  if rest ~= '' then
    local kk, pp = string.match(rest, '^ ([0123]) (%d+)$')
    if not kk then
      return false
    end
    k, pv = tonumber(kk), tonumber(pp)
  end
  t, s, f, u, a, d, i = tonumber(t), tonumber(s), tonumber(f), tonumber(u), tonumber(a),
    tonumber(d), tonumber(i)
  if not in_range(t, s, f, u, a, d, i, pv) then
    return false
  end
  return t, s, f, u, a, d, i, k, pv, false
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
-- (which refills as the policy allows, so the service resumes by itself), in text as the module
-- replaces it, and the call fails: "unavailable", a denial.
local function damaged(key, p, now)
  redis.call('SET', key, format_bucket(0, now, now + p.per, now, { 0, 0, 0 }, nil, nil, false),
    'PX', int(p.per + 1000))
  error({ err = 'RLCORRUPT a bucket value ratelimit did not write, replaced by an empty bucket' })
end
