-- sem_acquire: take a permit of a semaphore, pick up one handed to the
-- caller, or join the semaphore's queue of waiters.
--
-- KEYS[1..2]  the holders key, and the caller's record (see semlib.lua
--             sem_keys_of: the other keys are named from the first)
-- ARGV[1..11] as for acquire.lua: token hash, ttl ms, subject, owner,
--             fence retention ms, waiter id ('' when not waiting), the
--             gateway's channel, remaining wait ms, waiter lease ms,
--             check_heard, arrival number
-- ARGV[12]    the limit: how many permits the semaphore has
-- ARGV[13]    only for a permit with a hard cap: its max hold, ms (see
--             acquire.lua ARGV[11]); '' for none when ARGV[14..15] follow
-- ARGV[14..15] only for a waiter with a priority (1 to 9): the priority,
--             and its head start, ms (see acquire.lua ARGV[13..14])
--
-- Returns  fencing_token
--              a permit taken now, with the TTL asked for, as a bare
--              integer (see lib_grant.lua granted_now)
--          {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, handed}
--              granted (handed: it was handed over earlier, picked up now)
--          {0, retry_ms, now_ms, rank, arrival}
--              all permits taken; retry_ms is when the soonest lease ends;
--              a waiter is queued at 0-based rank (-1: not queued)
--          {-1, limit}
--              the semaphore is in use with another limit (a waiter
--              already queued waits on under the limit in force: a resize
--              does not turn it away)
--
-- Each change it makes moves the semaphore's index on (see semlib.lua).
--
-- A permit that frees goes to the queue first: nobody who just arrived
-- gets ahead of those waiting, and a waiter at the head blocks later
-- arrivals, so nobody starves.

local S = sem_keys_of(KEYS[1], KEYS[2])
S.keep = ARGV[5]
local tok, ttl, me, limit = ARGV[1], ARGV[2], ARGV[6], tonumber(ARGV[12])
local max_hold = ARGV[13]
if max_hold == '' then
  max_hold = nil
end
-- The token's record: nil for a new token, and so the read that stops the
-- script while its slot migrates (keyed, as acquire.lua is).
local rec = redis.call('GET', S.record)
local now, t = clock()
purge(S, now)

-- One read: the caller's permit, the limit in force and the index.
local f = redis.call('HMGET', S.holders, tok, '#limit', '#i')
found(S, f[3], t)
local mine = f[1]
if mine then
  if me ~= '' then
    local queued = redis.call('ZSCORE', S.queue, me)
    dequeue(S, me)
    if queued then
      bump(S, redis.call('ZCARD', S.leases))
    end
  end
  local handed, by = string.match(rec or '', '^h(%d):(.*)$')
  if by == CALL_ID then
    -- This call, delivered again: it answers the permit it took or picked
    -- up, as it did (see acquire.lua).
    local h = cjson.decode(mine)
    return sem_done(S, settle(S, {GRANTED, tonumber(h.f), tonumber(h.t), now, tonumber(h.a), tonumber(handed)}))
  end
  return sem_done(S, settle(S, holder_reply(S, now, tok, 1)))
end

-- A token whose record exists took a permit before, or gave its wait up:
-- a late or repeated delivery, which takes nothing (see acquire.lua).
local c = rec and string.sub(rec, 1, 1)
if c and (me == '' or (c ~= 'b' and c ~= 'h') or string.match(rec, ':(.*)$') == CALL_ID) then
  return FENCED
end

local current = tonumber(f[2])
if current ~= limit then
  local live = redis.call('ZCARD', S.leases)
  local queued = sem_first(S, now, live)
  if current and me ~= '' and redis.call('ZSCORE', S.queue, me) then
    limit = current -- resized while it waited (sem_resize.lua): it waits on
  elseif live > 0 or queued then
    return sem_done(S, {-1, current or limit})
  else
    redis.call('HSET', S.holders, '#limit', limit) -- idle: the new limit applies
  end
end

local seq, joined = 0, false
if me ~= '' then
  seq, joined = enqueue(S, now, me, ARGV[11], ARGV[8], ARGV[9],
    {g = ARGV[7], t = tok, ttl = ttl, s = ARGV[3], o = ARGV[4], cap = max_hold, pr = ARGV[14]}, ARGV[15])
end
local got, free, live = sem_handoff(S, t, now, limit, ARGV[5], ARGV[10], me)
if got then
  return sem_done(S, settle(S, holder_reply(S, now, tok, 0, live)))
end
if me == '' and free then
  local _, fence_n = add_holder(S, t, now, live, tok, ttl, ttl, ARGV[3], ARGV[4], ARGV[5], false, max_hold,
    session_member())
  keep_keys(S, now, true) -- free: sem_handoff found nobody alive waiting, and dropped the rest
  -- A permit taken now, not provisional: its reply needs no read back.
  return sem_done(S, granted_now(S, fence_n, ttl, now))
end

local rank = -1
if me ~= '' then
  if joined then
    -- A waiter more. One queued already (its acquire again: a reply lost)
    -- changes nothing a GET shows, and the index stays.
    bump(S, live)
  end
  rank = redis.call('ZRANK', S.queue, me) or -1
  keep_keys(S, now)
end
return sem_done(S, {0, soonest(S, now), now, rank, seq})
