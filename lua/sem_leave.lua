-- sem_leave: a semaphore waiter gives up (its wait ran out, its caller went
-- away, or the outcome of its last call is unknown).
--
-- KEYS[1..7]  the holders, leases, fence, queue, alive and waiters keys,
--             and the waiter's record (see semlib.lua)
-- ARGV[1..5]  as for leave.lua: waiter id (may be empty), token hash,
--             '1' to release a permit it holds ('0' to pick it up), fence
--             retention ms, check_heard
--
-- Returns  {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, 1}
--              a permit was handed to it before it left, now picked up
--          {2}                  it had a permit, and released it
--          {0, retry_ms, now_ms}  it left the queue without a permit

local S = sem_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
local now, t = clock()
purge(S, now)
if ARGV[1] ~= '' then
  dequeue(S, ARGV[1])
end
if redis.call('HEXISTS', S.holders, ARGV[2]) == 1 then
  if ARGV[3] == '1' then
    local h = cjson.decode(redis.call('HGET', S.holders, ARGV[2]))
    redis.call('HDEL', S.holders, ARGV[2])
    redis.call('ZREM', S.leases, ARGV[2])
    released(S, now - (tonumber(h.a) or now))
    local limit = tonumber(redis.call('HGET', S.holders, '#limit'))
    if limit then
      sem_handoff(S, t, now, limit, ARGV[4], ARGV[5], nil)
    end
    return {2}
  end
  return settle(S, holder_reply(S, now, ARGV[2], 1))
end
fenced(S) -- its acquire, should Redis receive it only now, takes nothing
local limit = tonumber(redis.call('HGET', S.holders, '#limit'))
if limit then -- our place may have been what held the others back
  sem_handoff(S, t, now, limit, ARGV[4], ARGV[5], nil)
end
return {0, soonest(S, now), now}
