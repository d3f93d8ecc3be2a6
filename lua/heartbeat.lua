-- heartbeat: a gateway says its waiters on one lock are still there, and
-- hands a lock whose lease ran out to the first waiter in line.
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     how long a waiter counts as alive without a heartbeat, ms
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
-- ARGV[4..]   the waiter ids
--
-- Returns  the number of those waiters still queued
--
-- A waiter whose gateway died stops being renewed; the hand-off skips it
-- once its alive time passes, so it delays the queue by at most that long.
-- A lease that ends publishes nothing, and a grant handed to a waiter whose
-- gateway froze is never released: every gateway with waiters looks once a
-- heartbeat, so the queue moves on within one heartbeat of such an end.

local K = keys_of(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local now, t = clock()
local n = 0
for i = 4, #ARGV do
  local w = redis.call('HGET', K.waiters, ARGV[i])
  if w then
    local until_ms = math.min(tonumber(cjson.decode(w).d), now + tonumber(ARGV[1]))
    redis.call('ZADD', K.alive, 'XX', string.format('%d', until_ms), ARGV[i])
    n = n + 1
  end
end
if redis.call('EXISTS', K.lock) == 0 then
  handoff(K, t, now, ARGV[2], ARGV[3])
end
return n
