-- sem_heartbeat: a gateway says its waiters on one semaphore are still
-- there, learns which of them are no longer queued, and hands on permits
-- whose lease ended.
--
-- KEYS[1]     the holders key (see semlib.lua sem_keys_of: the other
--             keys are named from it)
-- ARGV[1..3]  waiter lease ms, fence retention ms, check_heard
-- ARGV[4..]   the waiter ids
--
-- Returns  one number per waiter id: 1 still queued, 0 not queued (handed
--          a permit, or dropped): its gateway runs its acquire again

local S = sem_keys_of(KEYS[1])
S.keep = ARGV[2]
local now, t = clock()
purge(S, now)
keep_alive(S, now, ARGV[1], ARGV, 4)
local f = redis.call('HMGET', S.holders, '#limit', '#i')
found(S, f[2], t)
local limit = tonumber(f[1])
if limit then
  sem_handoff(S, t, now, limit, ARGV[2], ARGV[3], nil)
end
return sem_done(S, still_queued(S, ARGV, 4))
