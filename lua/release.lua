-- release: take one hold away from the caller's grant; the last one frees
-- the lock and hands it straight to the first waiter still alive.
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
--
-- Returns  {1, 0, held} released (and handed to the next waiter, if any);
--                      held is how long the grant was held, ms
--          {1, holds}  one hold taken away; the caller still holds the
--                      lock that many times (see reenter.lua)
--          {0}         not held: released already, or the lease expired
--          {-1}        held by another grant
--
-- Compare and delete happen in one script: in Go, the lock could expire and
-- be taken by someone else between the GET and the DEL. The hand-off costs
-- one PUBLISH to one gateway however many wait.

local K = keys_of(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local tok = redis.call('HGET', K.lock, 'tok')
if not tok then
  return {0}
end
if tok ~= ARGV[1] then
  return {-1}
end
local holds = tonumber(redis.call('HGET', K.lock, 'holds')) or 1
if holds > 1 then
  redis.call('HSET', K.lock, 'holds', holds - 1)
  return {1, holds - 1}
end
local at = tonumber(redis.call('HGET', K.lock, 'at'))
redis.call('DEL', K.lock)
local now, t = clock()
handoff(K, t, now, ARGV[2], ARGV[3], nil)
return {1, 0, now - (at or now)}
