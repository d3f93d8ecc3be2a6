-- release: take one hold away from the caller's grant; the last one frees
-- the lock and hands it straight to the first waiter still alive.
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
-- ARGV[4]     the caller's gateway channel (optional): the next waiter, if
--             it waits on that gateway, gets a full grant, told in the reply
--             instead of by a message
--
-- Returns  {1, 0}      released (and handed to the next waiter, if any)
--          {1, 0, waiter id, fencing_token, ttl_ms, now_ms, acquired_at_ms}
--                      released, and handed in full to that waiter of the
--                      caller's gateway, which delivers it
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
redis.call('DEL', K.lock)
local now, t = clock()
local id, full = handoff(K, t, now, ARGV[2], ARGV[3], nil, ARGV[4])
if full then
  local g = held_by(K, now, 0)
  return {1, 0, id, g[2], g[3], g[4], g[5]}
end
return {1, 0}
