-- break: end every grant of the lock at once, whoever holds it (the
-- exclusive one, or every shared one), and hand the lock to the waiters at
-- the head of its queue, as a release does. An administrator's step: the
-- gateway decides who may; the script needs no owner token.
--
-- KEYS[1..9]  the lock, fence, queue, alive, waiters, readers, delay,
--             history and held keys (see lib_keys.lua); no record: the
--             breaker does not know whose grants it ends (see broken)
-- ARGV[1]     how long the fencing counter outlives its last use, ms
-- ARGV[2]     '1' to drop a waiter whose gateway does not hear the hand-off
-- ARGV[3]     the lock's options (see lock_keys)
-- ARGV[4]     the caller's gateway channel (optional): the next waiter, if
--             it waits on that gateway for an exclusive hold, gets a full
--             grant, told in the reply instead of by a message
-- ARGV[5]     who breaks it (the breaker's subject), for the history
--
-- Returns  {1, broken}  the grants ended, broken of them, and the lock was
--                       handed on, if anyone waits
--          {1, broken, waiter id, fencing_token, ttl_ms, now_ms, acquired_at_ms}
--                       ended, and handed in full to that waiter of the
--                       caller's gateway, which delivers it
--          {0}          nobody held the lock: nothing changed
--
-- Every grant ends, and the next one is made, in one script: there is no
-- moment at which a broken grant and the next one both exist. Each broken
-- grant's record says 'b' (lib_record.lua), so that its holder's next
-- renew, re-entry or release answers BROKEN.

local K = lock_keys(ARGV[3])
local now, t = clock()
local tok = current(K, now)
if not tok then
  return {0}
end
K.ev = {}
local ended = {}
if tok == '' then
  for _, r in ipairs(redis.call('ZRANGE', K.readers, 0, -1)) do
    ended[#ended + 1] = r
    local h = reader(K, r)
    if h then
      event(K, 'broken', now, h.s, h.o, h.f, nil, ARGV[5])
    end
  end
  redis.call('DEL', K.lock, K.readers)
else
  ended[1] = tok
  local f = holder_of(K)
  event(K, 'broken', now, f[2], f[3], f[1], nil, ARGV[5])
  if K.hist_n > 0 then
    redis.call('DEL', K.lock, K.held)
  else
    redis.call('DEL', K.lock)
  end
end
for _, h in ipairs(ended) do
  broken(K, h)
  if K.index then
    index_del(K, h, now)
  end
end
lift_delay(K, now)
local h = handoff(K, t, now, nil, ARGV[1], ARGV[2], nil, ARGV[4])
local ev = K.ev
K.ev = nil
if #ev > 0 then
  push_events(K, ev, K.ev_extends)
end
if h.near then
  local g = h.near_reply
  return {GRANTED, #ended, h.near, g[2], g[3], g[4], g[5]}
end
return {GRANTED, #ended}
