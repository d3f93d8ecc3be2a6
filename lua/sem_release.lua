-- sem_release: give back the caller's permit, and hand free permits to the
-- waiters at the head of the queue.
--
-- KEYS[1..2]  the holders key, and the caller's record (see semlib.lua
--             sem_keys_of: the other keys are named from the first)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
--             (exact off Cluster, and so '1' only there)
-- ARGV[4]     '1' for a permit that a session's one-step acquire may have
--             noted (session_acquire.lua): its member is marked released
--
-- Returns  at         released (and handed on, if anyone waits), as a bare
--                     integer: when the permit was granted, ms on Redis's
--                     clock (the usual reply, and so the cheapest, as
--                     release.lua's)
--          {1, 0}     released within RECORD_MS before (see lib_record.lua): a
--                     repeated release succeeds again, and changes nothing.
--          {1, 0, at, REPEATED}
--                     this call, delivered again (see release.lua).
--                     Permits are not re-entrant, so never more holds
--          {0, why}   not a holder: why is EXPIRED or UNKNOWN
--
-- A release moves the semaphore's index on, and writes nothing for it: its
-- lease is no longer live (see semlib.lua).

local S = sem_keys_of(KEYS[1], KEYS[2])
S.keep = ARGV[2]
guard_migrating(ARGV[3] == '1')
local now, t = clock()
purge(S, now)
-- One read: the caller's permit, the limit in force and the index.
local f = redis.call('HMGET', S.holders, ARGV[1], '#limit', '#i')
found(S, f[3], t)
local h = f[1]
if not h then
  local reason, at, by = why_released(S)
  if reason == RELEASED and by == CALL_ID then
    -- This call, delivered again (see release.lua).
    redis.call('PEXPIRE', S.record, RECORD_PX)
    return {1, 0, at, REPEATED}
  elseif reason == RELEASED then
    return {1, 0}
  end
  return {0, reason}
end
redis.call('HDEL', S.holders, ARGV[1])
redis.call('ZREM', S.leases, ARGV[1]) -- a lease less: the index moves on (see semlib.lua)
h = cjson.decode(h)
local at = h.a or string.format('%d', now)
released(S, at)
if ARGV[4] == '1' then
  member_released(h.sm) -- a permit taken in a session in one step: it tells the session
end
local limit = tonumber(f[2])
-- Only a queue has anyone to hand a permit to: the usual release, which
-- nobody waits for, skips the count of live leases that a hand-off begins
-- with (a queue's hand-off counts the queue twice).
if limit and redis.call('ZCARD', S.queue) > 0 then
  sem_handoff(S, t, now, limit, ARGV[2], ARGV[3], nil)
end
return sem_done(S, at + 0)
