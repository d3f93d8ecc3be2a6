-- sem_heartbeat: a gateway says its waiters on one semaphore are still
-- there, learns which of them are no longer queued, and hands on permits
-- whose lease ended.
--
-- KEYS[1..6]  the holders, leases, fence, queue, alive and waiters keys
--             (see semlib.lua)
-- ARGV[1..3]  waiter lease ms, fence retention ms, check_heard
-- ARGV[4..]   the waiter ids
--
-- Returns  one number per waiter id: 1 still queued, 0 not queued (handed
--          a permit, or dropped): its gateway runs its acquire again

local S = sem_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local now, t = clock()
purge(S, now)
local lease = tonumber(ARGV[1])
for i = 4, #ARGV do
  local w = redis.call('HGET', S.waiters, ARGV[i])
  if w then
    local until_ms = math.min(tonumber(cjson.decode(w).d), now + lease)
    redis.call('ZADD', S.alive, 'XX', string.format('%d', until_ms), ARGV[i])
  end
end
local limit = tonumber(redis.call('HGET', S.holders, '#limit'))
if limit then
  sem_handoff(S, t, now, limit, ARGV[2], ARGV[3], nil)
end
local queued = {}
for i = 4, #ARGV do
  queued[i - 3] = redis.call('HEXISTS', S.waiters, ARGV[i])
end
return queued
