-- sem_renew: extend the lease of the caller's permit. Never brings back a
-- permit whose lease ended.
--
-- KEYS[1]  the semaphore's holders key (see semlib.lua)
-- KEYS[2]  its leases key
-- KEYS[3]  the caller's record (see lib_keys.lua)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the new TTL in ms; '0' restores the TTL it was acquired with
--
-- Returns  {1, fencing_token, ttl_ms[, 0, cap_ms]}
--                                     renewed; cap_ms, for a permit with a
--                                     hard cap, how long until it ends it
--                                     (see renew.lua)
--          {0, why}                   not a holder: why is RELEASED,
--                                     EXPIRED or UNKNOWN (see lib_record.lua)

local S = {record = KEYS[3], delay_ms = 0}
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local h = redis.call('HGET', KEYS[1], ARGV[1])
local now = clock()
if not ends or not h or ends <= now then
  return {0, why(S)}
end
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
local keep = math.max(redis.call('PTTL', KEYS[1]), ttl)
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
keep_idem(h.ik, ttl) -- its idempotency record (idem_lib.lua)
if cap then
  return settle(S, {1, tonumber(h.f), ttl, 0, cap - now})
end
return settle(S, {1, tonumber(h.f), ttl})
