-- One decision (Store::acquire), in one atomic step: expire leases, refill, check, take.
--
-- KEYS[1] the bucket (a string, see format_bucket),
-- KEYS[2] its leases (a sorted set of lease ids by expiry), KEYS[3] the request id's record
-- (a hash, see request.lua; only read and written when ARGV[9] ~= '0'). All three share one
-- hash tag.
-- ARGV: now ('' = the server's TIME), limit, per_ms, cost, max_inflight, lease_ttl_ms,
-- lease id (hex, '' without inflight), dry_run ('1'/'0'), request_ttl_ms ('0' = no request id),
-- the bucket's name (hex, recorded with an admission), the call's terms (hex), replays, the
-- policy's code (0 token bucket, 1 fixed window, 2 sliding window, '3:<amount>' a stepped
-- bucket: core::bucket::Policy::code_arg), and for a reservation
-- (ratelimit_reserve) the longest wait to book in ms ('inf': any; absent: a plain call).
-- Returns { reason (0 ok, 1 rate, 2 inflight, 3 in progress), remaining, retry_after,
-- reset_after, next_token, flags (1 dry run, 2 replay, 4 clock regressed), lease id or '',
-- leases expired, wait (ms until a booking's tokens are earned), reserved (whole tokens owed) }.
-- (No redis.replicate_commands(): a no-op from Redis 5 on that costs a third of the script. A
-- server that refuses TIME before a write fails the call before it writes, and the client then
-- decides with its own clock.)
-- A plain call (no slot, no request id) may pass its bucket alone, and now, limit, per_ms, cost,
-- then '1' for a shadow scope and the policy code (both optional, '0' when left out): fewer keys
-- and arguments for the server to parse and hand over (the other two keys are never touched by
-- such a call). The native RL.ACQUIRE takes the same.
local A = ARGV
if #KEYS == 1 then
  A = { ARGV[1], ARGV[2], ARGV[3], ARGV[4], '0', '0', '', ARGV[5] or '0', '0', '', '', '0',
    ARGV[6] or '0' }
end
local now = now_ms(A[1])
local GRACE_MS = 1000
local limit, per, cost = tonumber(A[2]), tonumber(A[3]), tonumber(A[4]) * MILLI
local max_inflight, lease_ttl, lease_id = tonumber(A[5]), tonumber(A[6]), A[7]
local request_ttl = tonumber(A[9])
local p = policy(limit, per, A[13])

-- A call with a request id: a replay or a retry in progress takes nothing and writes no
-- bucket; either tells the bucket as it stands (what a peek would say). Judged by the
-- decision's clock (the record's own key expires on the server's).
if request_ttl > 0 then
  local j, ends = judged_request(KEYS[3], KEYS[2], A[10], A[11], now)
  if j ~= 'fresh' then
    local t, s, _, _, _, _, _, k, pv = parse_bucket(get_bucket(KEYS[1]))
    if t == false then
      damaged(KEYS[1], p, now)
    end
    local b = full(p, now)
    if t then
      b = refill(p, bucket(t, s, pv, k), now)
    end
    local remaining, reset_after = whole_tokens(p, b, now), wait_for(p, b, p.cap, now)
    local next_token = wait_for_next_token(p, b, now)
    local owed = reserved(p, b, now)
    if j == 'replay' then
      return { 0, remaining, 0, reset_after, next_token, 2, '', 0, 0, owed }
    end
    local dry = 0
    if A[8] == '1' then
      dry = 1
    end
    return { 3, remaining, math.max(0, ends - now), reset_after, next_token, dry, '', 0, 0, owed }
  end
end

local live, earliest, expired = 0, nil, 0
if max_inflight > 0 then
  expired = first_on('leases', KEYS[2], 'ZREMRANGEBYSCORE', KEYS[2], '-inf', int(now))
  live = redis.call('ZCARD', KEYS[2])
  if live > 0 then
    earliest = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2])
  end
end

local stored, counts = full(p, now), { 0, 0, 0 }
local t, s, _, _, a, d, i, k, pv, binary = parse_bucket(get_bucket(KEYS[1]))
if t == false then
  damaged(KEYS[1], p, now)
end
if t then
  stored, counts = bucket(t, s, pv, k), { a, d, i }
end
local b, regressed = refill(p, stored, now)

-- A reservation books what is not there yet when it is earned within its longest wait.
local booking = nil
if A[14] ~= nil and A[14] ~= '' then
  local max_wait = math.huge
  if A[14] ~= 'inf' then
    max_wait = tonumber(A[14])
  end
  local w = book_wait(p, b, cost, now)
  if w <= max_wait then
    booking = w
  end
end

local reason, retry, wait = 0, 0, 0
if booking == nil and available(p, b, now) < cost then
  reason, retry = 1, wait_for(p, b, cost, now)
elseif max_inflight > 0 and live >= max_inflight then
  reason, retry = 2, math.max(0, earliest - now)
elseif booking ~= nil then
  book(p, b, cost, booking, now)
  wait = booking
else
  take(p, b, cost, now)
end
local dry = A[8] == '1' and reason ~= 0

local full_again = full_at(p, b)
counts[reason + 1] = counts[reason + 1] + 1
local lease, last = '', full_again
if reason == 0 and max_inflight > 0 and lease_id ~= '' then
  redis.call('ZADD', KEYS[2], int(now + lease_ttl), lease_id)
  lease = lease_id
end
if live > 0 or lease ~= '' then
  local latest = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
  redis.call('PEXPIRE', KEYS[2], int(math.max(0, latest - now) + GRACE_MS))
  last = math.max(last, latest)
end
-- Idle state vanishes by itself: the leases with the last of them, the bucket once it would
-- be full again (it then holds no information) and none of its leases lives, a second later:
-- a margin for a decision clock that is not the one Redis expires keys by (the host's, when
-- the server refuses TIME in scripts). A full bucket kept longer decides as a missing one.
redis.call('SET', KEYS[1],
  format_bucket(b.tokens, b.stamp, full_again, now, counts, b.kind, b.prev, binary), 'PX',
  int(math.max(0, last - now) + GRACE_MS))

local remaining = whole_tokens(p, b, now)
local reset_after = wait_for(p, b, p.cap, now)
local next_token = wait_for_next_token(p, b, now)
if reason == 0 and request_ttl > 0 then
  local ttl = request_ttl
  if lease ~= '' then
    ttl = math.max(ttl, lease_ttl)
  end
  remember_request(KEYS[3], A[10], lease, A[11], tonumber(A[12]), now + ttl, now)
end

local flags = 0
if dry then
  flags = flags + 1
end
if regressed then
  flags = flags + 4
end
return { reason, remaining, retry, reset_after, next_token, flags, lease, expired, wait,
  reserved(p, b, now) }
