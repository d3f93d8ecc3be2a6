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
-- Returns  {0}                                   begun: the record is
--                                                pending for this attempt
--          {1, ciphertext, fence, ttl_ms, holds} the key's grant is live
--          {2, pttl_ms}                          an attempt with the key
--                                                still runs
--          {3}                                   the key was used for
--                                                another request
--          {4}                                   the key's grant ended
--
-- Check and create are one step, so that two attempts that arrive together
-- cannot both begin.

local R = idem_keys()
local rec = redis.call('HMGET', R.record, 'st', 'rq', 'c', 'th', 'f')
if not rec[1] then
  redis.call('HSET', R.record, 'st', 'p', 'rq', ARGV[1], 'n', ARGV[2])
  redis.call('PEXPIRE', R.record, ARGV[3])
  return {0}
end
if rec[2] ~= ARGV[1] then
  return {3}
end
if rec[1] == 'p' then
  return {2, redis.call('PTTL', R.record)}
end
local ttl, holds = idem_live(R, idem_now(), rec[4])
if not ttl then
  return {4}
end
return {1, rec[3], tonumber(rec[5]), ttl, holds}
