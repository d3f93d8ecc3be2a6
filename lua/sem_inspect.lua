-- sem_inspect: describe the holders of a semaphore, and its index.
-- Read-only (run with EVALSHA_RO): holders whose lease ended are left out,
-- not dropped.
--
-- KEYS[1]  the semaphore's holders key (see semlib.lua)
-- KEYS[2]  its leases key
-- KEYS[3]  its queue of waiters
-- KEYS[4]  its waiters' requests (S.waiters)
--
-- Returns  {index, limit, waiters, now_ms, [fencing_token, ttl_ms, subject,
--          owner, acquired_at_ms, hard cap (ms on the Redis clock, 0 for
--          none)] for each live holder, in lease order}
--          ... as above, then the queue's priorities, when anyone waits:
--                one digit per waiter, as inspect.lua answers a lock's
--          {index}  nobody holds a permit
--
-- index is the semaphore's index (see semlib.lua), 0 while its record has
-- none: read in the same call as the holders, so that a long-poll from it
-- waits for the next change.
-- Token hashes are never returned.

local now = clock()
local f = redis.call('HMGET', KEYS[1], '#limit', '#i')
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
local index = sem_index(f[2], #live / 2)
if #live == 0 then
  return {index}
end
local out = {index, tonumber(f[1]) or 0, redis.call('ZCARD', KEYS[3]), now}
for i = 1, #live, 2 do
  local h = redis.call('HGET', KEYS[1], live[i])
  if h then
    h = cjson.decode(h)
    for _, v in ipairs({tonumber(h.f), tonumber(live[i + 1]) - now, h.s, h.o, tonumber(h.a), tonumber(h.cap) or 0}) do
      out[#out + 1] = v
    end
  end
end
-- Only when anyone waits: a semaphore nobody waits for costs what it did.
if out[3] > 0 then
  out[#out + 1] = queue_priorities(KEYS[3], KEYS[4])
end
return out
