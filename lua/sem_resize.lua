-- sem_resize: change the limit of a semaphore in use, as its administrator
-- asks. A raised limit hands the new permits to the waiters at the head of
-- the queue at once (as sem_release.lua hands on a freed one); a lowered
-- one takes no permit back, and grants nothing until fewer hold than it.
--
-- KEYS[1]     the holders key (see semlib.lua sem_keys_of: the other
--             keys are named from it)
-- ARGV[1]     the new limit, 1 to locks.MaxLimit
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
--
-- Returns  {GRANTED, limit, holders, waiters}  resized: the limit now in
--              force, and how many hold and wait after the hand-off
--          {NOT_GRANTED}  nobody holds or waits: an idle semaphore keeps no
--              limit, the next acquire's applies
--
-- The limit lives in S.holders ('#limit') only while the semaphore is in
-- use, so a resize lasts until it is idle. One script: the new limit and
-- the hand-off it allows are seen together, never one without the other.

local S = sem_keys_of(KEYS[1])
S.keep = ARGV[2]
local limit = tonumber(ARGV[1])
local now, t = clock()
purge(S, now)
local f = redis.call('HMGET', S.holders, '#limit', '#i')
found(S, f[2], t)
local live = redis.call('ZCARD', S.leases)
if live == 0 and not sem_first(S, now, live) then
  return sem_done(S, {NOT_GRANTED})
end
if tonumber(f[1]) ~= limit then -- a new limit: a change the index tells
  redis.call('HSET', S.holders, '#limit', limit, '#i', bump(S, live))
  S.dirty = false
end
sem_handoff(S, t, now, limit, ARGV[2], ARGV[3], nil)
return sem_done(S, {GRANTED, limit, redis.call('ZCARD', S.leases), redis.call('ZCARD', S.queue)})
