-- sem_release: give back the caller's permit, and hand free permits to the
-- waiters at the head of the queue.
--
-- KEYS[1..6]  the holders, leases, fence, queue, alive and waiters keys
--             (see semlib.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
--
-- Returns  {1, 0}  released (and handed on, if anyone waits); semaphore
--                  permits are not re-entrant, so never more holds
--          {0}     not a holder: released already, or the lease ended

local S = sem_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local now, t = clock()
purge(S, now)
if redis.call('HDEL', S.holders, ARGV[1]) == 0 then
  return {0}
end
redis.call('ZREM', S.leases, ARGV[1])
local limit = tonumber(redis.call('HGET', S.holders, '#limit'))
if limit then
  sem_handoff(S, t, now, limit, ARGV[2], ARGV[3], nil)
end
return {1, 0}
