-- sem_leave: a semaphore waiter gives up (its wait ran out, its caller went
-- away, or the outcome of its last call is unknown).
--
-- KEYS[1..2]  the holders key, and the waiter's record (see semlib.lua
--             sem_keys_of: the other keys are named from the first)
-- ARGV[1..5]  as for leave.lua: waiter id (may be empty), token hash,
--             '1' to release a permit it holds ('0' to pick it up), fence
--             retention ms, check_heard
--
-- Returns  {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, 1}
--              a permit was handed to it before it left, now picked up
--          {2}                  it had a permit, and released it
--          {0, retry_ms, now_ms}  it left the queue without a permit
--
-- Each change it makes moves the semaphore's index on (see semlib.lua).

local S = sem_keys_of(KEYS[1], KEYS[2])
S.keep = ARGV[4]
local now, t = clock()
purge(S, now)
-- One read: the caller's permit, the limit in force and the index.
local f = redis.call('HMGET', S.holders, ARGV[2], '#limit', '#i')
found(S, f[3], t)
if ARGV[1] ~= '' then
  local queued = redis.call('ZSCORE', S.queue, ARGV[1])
  dequeue(S, ARGV[1])
  if queued then
    bump(S, redis.call('ZCARD', S.leases))
  end
end
local limit = tonumber(f[2])
if f[1] then
  if ARGV[3] == '1' then
    local h = cjson.decode(f[1])
    redis.call('HDEL', S.holders, ARGV[2])
    redis.call('ZREM', S.leases, ARGV[2]) -- a lease less: the index moves on
    released(S, now - (tonumber(h.a) or now))
    if limit then
      sem_handoff(S, t, now, limit, ARGV[4], ARGV[5], nil)
    end
    return sem_done(S, {2})
  end
  return sem_done(S, settle(S, holder_reply(S, now, ARGV[2], 1)))
end
fenced(S) -- its acquire, should Redis receive it only now, takes nothing
if limit then -- our place may have been what held the others back
  sem_handoff(S, t, now, limit, ARGV[4], ARGV[5], nil)
end
return sem_done(S, {0, soonest(S, now), now})
