-- sem_renew: extend the lease of the caller's permit. Never brings back a
-- permit whose lease ended.
--
-- KEYS[1]  the semaphore's holders key (see semlib.lua)
-- KEYS[2]  its leases key
-- KEYS[3]  the caller's record (see lib_keys.lua)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the new TTL in ms; '0' restores the TTL it was acquired with
-- ARGV[3]  the fence retention, ms: how long the keys outlive the lease
--          (see keep_keys in semlib.lua)
--
-- Returns  {1, fencing_token, ttl_ms[, 0, cap_ms]}
--                                     renewed; cap_ms, for a permit with a
--                                     hard cap, how long until it ends it
--                                     (see renew.lua)
--          {0, why}                   not a holder: why is RELEASED,
--                                     EXPIRED or UNKNOWN (see lib_record.lua)
--
-- A renewal moves the semaphore's index on (see semlib.lua).

local S = sem_keys(KEYS[1], KEYS[2], nil, nil, nil, nil, KEYS[3])
S.keep = ARGV[3]
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local f = redis.call('HMGET', KEYS[1], ARGV[1], '#i')
local h = f[1]
local now, t = clock()
if not ends or not h or ends <= now then
  return refused(S, 0)
end
found(S, f[2], t)
h = cjson.decode(h)
local ttl = tonumber(ARGV[2])
if ttl == 0 then
  ttl = tonumber(h.t)
end
local cap = tonumber(h.cap)
if cap then
  if cap <= now then -- its last millisecond: too late to renew
    return {0, why(S)}
  end
  ttl = math.min(ttl, cap - now)
end
redis.call('ZADD', KEYS[2], string.format('%d', now + ttl), ARGV[1])
-- A new end of its lease, which inspect shows. No purge ran: the live
-- leases are those that end after now.
bump(S, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'))
local keep = math.max(redis.call('PTTL', KEYS[1]), ttl + tonumber(S.keep))
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
keep_idem(h.ik, ttl) -- its idempotency record (idem_lib.lua)
if cap then
  return sem_done(S, settle(S, {1, tonumber(h.f), ttl, 0, cap - now}))
end
return sem_done(S, settle(S, {1, tonumber(h.f), ttl}))
