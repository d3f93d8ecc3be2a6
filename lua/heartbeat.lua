-- heartbeat: a gateway says its waiters on one lock are still there.
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     how long a waiter counts as alive without a heartbeat, ms
-- ARGV[2..]   the waiter ids
--
-- Returns  the number of those waiters still queued
--
-- A waiter whose gateway died stops being renewed; the hand-off skips it
-- once its alive time passes, so it delays the queue by at most that long.

local K = keys_of(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local now = clock()
local n = 0
for i = 2, #ARGV do
  local w = redis.call('HGET', K.waiters, ARGV[i])
  if w then
    local until_ms = math.min(tonumber(cjson.decode(w).d), now + tonumber(ARGV[1]))
    redis.call('ZADD', K.alive, 'XX', string.format('%d', until_ms), ARGV[i])
    n = n + 1
  end
end
return n
