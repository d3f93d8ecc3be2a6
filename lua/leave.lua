-- leave: a waiter gives up (its wait ran out, or its caller went away).
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     the waiter id
-- ARGV[2]     SHA-256 of the waiter's owner token
--
-- Returns  {1, fencing_token, pttl_ms, now_ms}  the lock was handed to this
--                                              waiter before it left: the
--                                              caller keeps or releases it
--          {0, pttl_ms, now_ms}                left the queue

local K = keys_of(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local now = clock()
dequeue(K, ARGV[1])
if redis.call('HGET', K.lock, 'tok') == ARGV[2] then
  return {1, tonumber(redis.call('HGET', K.lock, 'fence')), redis.call('PTTL', K.lock), now}
end
return {0, redis.call('PTTL', K.lock), now}
