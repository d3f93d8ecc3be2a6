-- idem_begin: the first step of an acquire with an Idempotency-Key. Finds
-- the key's record, or makes one, pending, for this attempt.
--
-- KEYS[1..]  the record, then the lock's hash, or the semaphore's holders
--            and leases (see idem_lib.lua)
-- ARGV[1]    the request's fingerprint
-- ARGV[2]    this attempt's nonce
-- ARGV[3]    how long a pending record lives, ms: the longest the attempt
--            can run, so that a gateway that died leaves none behind
--
-- Returns  {IDEM_BEGUN}              begun: the record is pending for
--                                   this attempt
--          {IDEM_LIVE, ciphertext, fence, ttl_ms, holds[, cap_ms]}
--                                   the key's grant is live; cap_ms, for
--                                   a grant with a hard cap only, how long
--                                   until it ends the grant
--          {IDEM_RUNNING, pttl_ms}  an attempt with the key still runs
--          {IDEM_OTHER_REQUEST}     the key was used for another request
--          {IDEM_ENDED}             the key's grant ended
--          (the codes are in protocol.lua)
--
-- Check and create are one step, so that two attempts that arrive together
-- cannot both begin.

local R = idem_keys()
local rec = redis.call('HMGET', R.record, 'st', 'rq', 'c', 'th', 'f')
if not rec[1] then
  redis.call('HSET', R.record, 'st', 'p', 'rq', ARGV[1], 'n', ARGV[2])
  redis.call('PEXPIRE', R.record, ARGV[3])
  return {IDEM_BEGUN}
end
if rec[2] ~= ARGV[1] then
  return {IDEM_OTHER_REQUEST}
end
if rec[1] == 'p' then
  return {IDEM_RUNNING, redis.call('PTTL', R.record)}
end
local now = now_ms()
local ttl, holds, cap = idem_live(R, now, rec[4])
if not ttl then
  return {IDEM_ENDED}
end
if cap then
  return {IDEM_LIVE, rec[3], tonumber(rec[5]), ttl, holds, math.max(cap - now, 0)}
end
return {IDEM_LIVE, rec[3], tonumber(rec[5]), ttl, holds}
