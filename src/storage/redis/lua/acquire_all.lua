-- Compound limits, all or nothing (Store::acquire_all), in one atomic step: every bucket is
-- refilled and checked before any is charged; a denial by any charges none. The same rule as
-- core::compound::decide_all (and, for which limit is reported, core::compound::tightest).
--
-- With n = ARGV[2]: KEYS[1..n] the buckets (strings, see format_bucket), KEYS[n+1] the first
-- bucket's leases, KEYS[n+2] the request id's record (see request.lua; only read and written
-- when request_ttl > 0). All share the subject's hash tag: one Cluster slot.
-- ARGV: now ('' = the server's TIME), n, lease_ttl_ms, lease id (hex, '' without inflight),
-- request_ttl_ms ('0' = no request id), the first bucket's name (hex), max_inflight (of the
-- first limit), the call's terms (hex), replays, then per limit: limit, per_ms, cost, dry_run
-- ('1'/'0'), policy code (0 token bucket, 1 fixed window, 2 sliding window).
-- Returns { reported (0-based), flags (2 replay, 4 clock regressed, 8 in progress), lease id or
-- '', leases expired (or, in progress, ms until the lease ends), the combined verdict, each limit's
-- verdict (flat) }, a verdict being { reason (0 ok, 1 rate, 2 inflight), remaining, retry_after,
-- reset_after, next_token, dry_run (0/1) }. A replay or a retry in progress returns each limit
-- as it stands (a peek) and its combined verdict is made from those by core::compound.
local now = now_ms(ARGV[1])
local GRACE_MS = 1000
local n = tonumber(ARGV[2])
local lease_ttl, lease_id, request_ttl = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local max_inflight = tonumber(ARGV[7])
local LK, QK = KEYS[n + 1], KEYS[n + 2]

local ps, cost, dry, stored, counts, binary = {}, {}, {}, {}, {}, {}
for i = 1, n do
  local o = 9 + (i - 1) * 5
  ps[i] = policy(tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), ARGV[o + 5])
  cost[i] = tonumber(ARGV[o + 3]) * MILLI
  dry[i] = ARGV[o + 4] == '1'
  local t, s, _, _, a, d, f, k, pv, bin = parse_bucket(get_bucket(KEYS[i]))
  binary[i] = bin
  if t == false then
    damaged(KEYS[i], ps[i], now)
  end
  if t then
    stored[i], counts[i] = bucket(t, s, pv, k), { a, d, f }
  else
    stored[i], counts[i] = full(ps[i], now), { 0, 0, 0 }
  end
end

local function verdict(p, b, reason, retry, shadow)
  return { reason, whole_tokens(p, b, now), retry, wait_for(p, b, p.cap, now), wait_for_next_token(p, b, now),
    shadow and 1 or 0 }
end

-- A replay or a retry in progress: nothing taken, no bucket written; each limit as it stands
-- now (what a peek would say).
if request_ttl > 0 then
  local j, ends = judged_request(QK, LK, ARGV[6], ARGV[8], now)
  if j ~= 'fresh' then
    local each = {}
    for i = 1, n do
      local b = refill(ps[i], stored[i], now)
      local reason, retry = 0, 0
      if available(ps[i], b, now) < MILLI then
        reason, retry = 1, wait_for(ps[i], b, MILLI, now)
      end
      for _, x in ipairs(verdict(ps[i], b, reason, retry, false)) do
        each[#each + 1] = x
      end
    end
    if j == 'replay' then
      return { 0, 2, '', 0, { 0, 0, 0, 0, 0, 0 }, each }
    end
    return { 0, 8, '', math.max(0, ends - now), { 0, 0, 0, 0, 0, 0 }, each }
  end
end

local live, earliest, expired = 0, nil, 0
if max_inflight > 0 then
  expired = first_on('leases', LK, 'ZREMRANGEBYSCORE', LK, '-inf', int(now))
  live = redis.call('ZCARD', LK)
  if live > 0 then
    earliest = tonumber(redis.call('ZRANGE', LK, 0, 0, 'WITHSCORES')[2])
  end
end

local bs, reason, retry, regressed, all = {}, {}, {}, false, true
for i = 1, n do
  local b, reg = refill(ps[i], stored[i], now)
  regressed = regressed or reg
  local r, w = 0, 0
  if available(ps[i], b, now) < cost[i] then
    r, w = 1, wait_for(ps[i], b, cost[i], now)
  elseif i == 1 and max_inflight > 0 and live >= max_inflight then
    r, w = 2, math.max(0, earliest - now)
  end
  bs[i], reason[i], retry[i] = b, r, w
  all = all and r == 0
end
if all then
  for i = 1, n do
    take(ps[i], bs[i], cost[i], now)
  end
end

-- The reported limit: the real denial with the longest wait, else the shadow one, else the
-- admission with the fewest tokens left; the first on ties.
local rep = nil
for _, shadow in ipairs({ false, true }) do
  for i = 1, n do
    if rep == nil and reason[i] ~= 0 and dry[i] == shadow then
      rep = i
    elseif rep ~= nil and reason[i] ~= 0 and dry[i] == shadow and retry[i] > retry[rep] then
      rep = i
    end
  end
  if rep ~= nil then
    break
  end
end
if rep == nil then
  rep = 1
  for i = 2, n do
    if whole_tokens(ps[i], bs[i], now) < whole_tokens(ps[rep], bs[rep], now) then
      rep = i
    end
  end
end

local lease = ''
if all and max_inflight > 0 and lease_id ~= '' then
  redis.call('ZADD', LK, int(now + lease_ttl), lease_id)
  lease = lease_id
end
counts[rep][reason[rep] + 1] = counts[rep][reason[rep] + 1] + 1
for i = 1, n do
  local last = full_at(ps[i], bs[i])
  local full_again = last
  if i == 1 and (live > 0 or lease ~= '') then
    local latest = tonumber(redis.call('ZRANGE', LK, -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', LK, int(math.max(0, latest - now) + GRACE_MS))
    last = math.max(last, latest)
  end
  redis.call('SET', KEYS[i], format_bucket(bs[i].tokens, bs[i].stamp, full_again, now, counts[i],
    bs[i].kind, bs[i].prev, binary[i]), 'PX',
    int(math.max(0, last - now) + GRACE_MS))
end

local each = {}
for i = 1, n do
  for _, x in ipairs(verdict(ps[i], bs[i], reason[i], retry[i], dry[i] and reason[i] ~= 0)) do
    each[#each + 1] = x
  end
end
local combined = verdict(ps[rep], bs[rep], reason[rep], retry[rep], dry[rep] and reason[rep] ~= 0)
if all and request_ttl > 0 then
  local ttl = request_ttl
  if lease ~= '' then
    ttl = math.max(ttl, lease_ttl)
  end
  remember_request(QK, ARGV[6], lease, ARGV[8], tonumber(ARGV[9]), now + ttl, now)
end

local flags = 0
if regressed then
  flags = flags + 4
end
return { rep - 1, flags, lease, expired, combined, each }
