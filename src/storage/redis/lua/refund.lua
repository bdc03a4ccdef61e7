-- Tokens given back (Store's refund, core::bucket::refund), in one atomic step: the bucket
-- refilled to now (converted from another policy), then a token bucket filled up to its
-- capacity, a debt paid by moving its booked instant earlier (rounded down: never minting), a
-- window's current count lowered, never below 0; a bucket saturated by forced charges (a debt
-- at MAX_BOOKED, a window at MAX_USED) gets nothing. A missing bucket is left missing; nothing is
-- written when nothing was given back.
-- KEYS[1] the bucket; ARGV: now ('' = the server's TIME), limit, per_ms, cost, policy code
-- (Policy::code_arg: a stepped bucket's amount after a colon).
-- Returns flags: 1 tokens were given back, 4 the clock was seen going backwards.
local now = now_ms(ARGV[1])
local p = policy(tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[5])
local milli = tonumber(ARGV[4]) * MILLI
local t, s, _, _, a, d, i, k, pv, binary = parse_bucket(get_bucket(KEYS[1]))
if t == false then
  damaged(KEYS[1], p, now)
end
if not t then
  return 0
end
local b, regressed = refill(p, bucket(t, s, pv, k), now)
local flags = 0
if regressed then
  flags = 4
end
local given = false
if (p.kind == TOKEN_BUCKET and b.prev ~= 0 and b.stamp >= MAX_BOOKED)
    or ((p.kind == FIXED_WINDOW or p.kind == SLIDING_WINDOW) and b.tokens >= MAX_USED) then
  -- Saturated by forced charges taken uncounted (core::bucket::refund): nothing given back.
  given = false
elseif p.kind == TOKEN_BUCKET and b.prev ~= 0 and b.stamp > now then
  -- A debt (see book): the booked instant moves earlier by the time `milli` take to earn,
  -- rounded down (floor(milli * per / cap), split at whole capacities for muldiv), never before
  -- now nor the latest booking's decision; once paid, what is left is held from there.
  local floor = math.max(now, b.prev)
  local q, r = divmod(milli, p.cap)
  local back = q * p.per + muldiv(r, p.per, p.cap)
  if b.stamp > floor and back < b.stamp - floor then
    -- back < stamp - floor < 2^53: exact.
    b.stamp = b.stamp - back
    given = back > 0
  else
    local owed_then = 0
    if b.stamp > floor then
      owed_then = owed(p, b, floor)
    end
    b = bucket(math.min(math.max(milli - owed_then, 0), p.cap), floor, 0, TOKEN_BUCKET)
    given = true
  end
elseif p.kind == TOKEN_BUCKET or p.kind == STEPPED_BUCKET then
  -- A stepped bucket in debt holds what its booked step leaves over: that grows, the step
  -- stays (core::bucket::refund).
  local before = math.min(b.tokens, p.cap)
  b.tokens = math.min(before + milli, p.cap)
  given = b.tokens > before
else
  local give = math.min(milli, b.tokens)
  b.tokens = b.tokens - give
  given = give > 0
end
if not given then
  return flags
end
-- The bucket is full no later than before: its expiry (which also covers its leases) stays.
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
  ttl = math.max(0, full_at(p, b) - now) + 1000
end
redis.call('SET', KEYS[1], format_bucket(b.tokens, b.stamp, full_at(p, b), now, { a, d, i }, b.kind,
  b.prev, binary), 'PX', int(ttl))
return flags + 1
