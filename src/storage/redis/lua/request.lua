-- Request ids: core::request's rule, in Lua, for acquire.lua and acquire_all.lua (which this
-- file is put before, after bucket.lua).
--
-- A request id's record is a hash at its own key (same hash tag as the bucket): b the bucket it
-- was charged to (hex), l the lease it took (hex, '' for none), t the terms' digest (hex),
-- n replays left, e its expiry (ms). A hash without t (the format before terms) is no record.

-- core::request::judge. `r`: HMGET b l t n e (false for a missing field); `lease_until`: the
-- expiry of the record's lease when found in its bucket's leases (nil otherwise). Returns
-- 'fresh', 'replay', or 'progress' and the lease's expiry.
local function judge_request(r, lease_until, bucket, terms, now)
  if not r[3] or r[1] ~= bucket or r[3] ~= terms then
    return 'fresh'
  end
  local expires = tonumber(r[5])
  if not expires or expires <= now then
    return 'fresh'
  end
  if lease_until and lease_until > now then
    return 'progress', lease_until
  end
  if (tonumber(r[4]) or 0) > 0 then
    return 'replay'
  end
  return 'fresh'
end

-- Reads the record at `qk`, judges it (the lease looked up in `lk`), and counts a replay down
-- (the last one forgets the record).
local function judged_request(qk, lk, bucket, terms, now)
  local r = first_on('a request record', qk, 'HMGET', qk, 'b', 'l', 't', 'n', 'e')
  local lease_until = nil
  if r[3] and r[2] and r[2] ~= '' then
    local e = redis.call('ZSCORE', lk, r[2])
    if e then
      lease_until = tonumber(e)
    end
  end
  local j, ends = judge_request(r, lease_until, bucket, terms, now)
  if j == 'replay' then
    local left = tonumber(r[4]) - 1
    if left <= 0 then
      redis.call('DEL', qk)
    else
      redis.call('HSET', qk, 'n', left)
    end
  end
  return j, ends
end

-- Remembers an admission (replacing any record at `qk`) until `expires`, with `replays`
-- replays; not at all when it could only ever be judged fresh (no replay, no lease).
local function remember_request(qk, bucket, lease, terms, replays, expires, now)
  redis.call('DEL', qk)
  if replays > 0 or lease ~= '' then
    redis.call('HSET', qk, 'b', bucket, 'l', lease, 't', terms, 'n', replays, 'e', int(expires))
    redis.call('PEXPIRE', qk, int(math.max(0, expires - now) + 1000))
  end
end
