-- acquire: take the lock, pick up a grant handed to the caller, or join
-- the lock's queue of waiters.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua)
-- ARGV[1]     SHA-256 of the new owner token (the token never reaches Redis)
-- ARGV[2]     lease TTL, ms
-- ARGV[3]     subject (who acquires)
-- ARGV[4]     owner label (may be empty)
-- ARGV[5]     the lock's and the gateway's options (see lock_keys)
-- ARGV[6]     's' for a shared hold, 'x' for an exclusive one; absent
--             ('x') when nothing follows it and ARGV[7] would be ''
-- ARGV[7]     the grant's value ('' or absent for none; exclusive holds
--             only): the lock's value while this grant holds it, a
--             waiter's too
-- ARGV[8..10] only for an acquire that waits: its waiter id; how much
--             longer the caller waits, ms; the waiter's arrival number
--             from an earlier call, to keep its place when it rejoins, '0'
--             for a new arrival. (A call pays for the arguments it sends:
--             one that does not wait sends none of these.)
-- ARGV[11]    only with a min hold: ms from the grant until which the
--             lock stays from others, released or not (see grant; the
--             caller sends ARGV[8..10] as '', '0', '0' if it does not
--             wait); a waiter's grant carries it too; '' for none
-- ARGV[12]    only for a grant with a hard cap: its max hold, ms (at
--             least ARGV[2] and the min hold; see lib_grant.lua grant). A
--             call with one sends ARGV[8..11] as '', '0', '0', '' if it
--             neither waits nor has a min hold
-- ARGV[13..14] only for a waiter with a priority (1 to 9): the priority,
--             and its head start in the queue, ms: the priority times the
--             gateway's priority aging (see lib_queue.lua enqueue). A call
--             with them sends ARGV[11..12] as '' for none
--
-- Returns  {SHARED_FULL, retry_ms}
--              a shared request that does not wait, when the lock has its
--              most shared holders (see shared_full); retry_ms is when the
--              soonest of their leases ends
--          fencing_token
--              granted now, with the TTL asked for, as a bare integer, on a
--              single Redis (see lib_grant.lua granted_now): the usual
--              reply, and so the cheapest; its acquired at is its now, and
--              it was not handed over
--          {1, fencing_token, ttl_ms}
--              granted now, in a session's one-step acquire, which cut the
--              lease to ttl_ms (see lib_grant.lua granted_now)
--          {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, handed}
--              granted; handed is 1 when this token already held the lock
--              (a retried call, or a hand-off, which this call picks up)
--          {0, retry_ms, now_ms, rank, arrival, resting}
--              held by another, or kept by the lock delay for retry_ms; a
--              waiter is queued at 0-based rank (-1: not queued) with that
--              arrival number, and behind the head of the queue gets
--              retry_ms 0: it waits for a hand-off, not for the lease;
--              resting is 1 when nobody holds it and a released grant's
--              min hold keeps it (see lib_handoff.lua rest), else 0
--
-- A free lock goes to the queue first: nobody who just arrived, or just
-- released, gets ahead of those already waiting. A shared request joins
-- the shared holders at once only when nobody alive waits: behind a
-- waiting exclusive request it waits (or is refused) too.

local K = lock_keys(ARGV[5])
local tok_hash, ttl, me, shared, value = ARGV[1], ARGV[2], ARGV[8] or '', ARGV[6] == MODE_SHARED, ARGV[7]
local min_hold, max_hold = ARGV[11], ARGV[12]
if min_hold == '' then
  min_hold = nil
end
if max_hold == '' then
  max_hold = nil
end
-- The token's record (lib_record.lua): nil for a new token, and so the
-- read that stops the script while its slot migrates (see once.lua).
local rec = redis.call('GET', K.record)
local now, t = clock()
local holder = current(K, now)
if holder == tok_hash then
  if me ~= '' then
    dequeue(K, me)
  end
  local handed, by = string.match(rec or '', '^h(%d):(.*)$')
  if by == CALL_ID then
    -- This call, delivered again: it answers the grant it made or picked
    -- up, as it did (Redis's lease of it began no earlier than the
    -- gateway sent the call).
    local f = redis.call('HMGET', K.lock, 'fence', 'ttl', 'at')
    return settle(K, {GRANTED, tonumber(f[1]), tonumber(f[2]), now, tonumber(f[3]), tonumber(handed)})
  end
  pick_up(K, now)
  return settle(K, held_by(K, now))
end
local r = holder == '' and reader(K, tok_hash)
if r then
  if me ~= '' then
    dequeue(K, me)
  end
  return settle(K, reader_reply(K, now, tok_hash, r, 1))
end

-- The token's record exists once it was granted (until RECORD_MS after
-- that grant's end) or its wait ended (leave.lua fenced). Then this is a
-- late or repeated delivery of a call whose grant, or whose end, has been
-- answered, and it takes nothing: an acquire has one effect however often
-- it is delivered, with no record of the call (see once.lua). But a
-- waiter whose hand-off ended before it picked it up (a break, 'b'; a
-- lease that ran out, 'h:' and the id of the hand-off's call) still
-- waits, and its calls go on; a copy of the call that was granted (its
-- own id after 'h') does not.
local c = rec and string.sub(rec, 1, 1)
if c and (me == '' or (c ~= 'b' and c ~= 'h') or string.match(rec, ':(.*)$') == CALL_ID) then
  return FENCED
end

local seq = 0
if me ~= '' then
  local req = {g = K.channel, t = tok_hash, ttl = ttl, s = ARGV[3], o = ARGV[4]}
  if shared then
    req.m = 's'
  end
  if value and value ~= '' then
    req.v = value
  end
  if min_hold then
    req.mh = min_hold
  end
  req.cap = max_hold
  req.pr = ARGV[13]
  seq = enqueue(K, now, me, ARGV[10], ARGV[9], K.alive_ms, req, ARGV[14])
end

local h = handoff(K, t, now, holder, K.retention, K.check_heard, me)
if h.mine then
  return settle(K, h.mine)
end
if me == '' then
  -- handoff left the lock free (and not delayed) only if nobody alive waits
  holder = h.holder
  local free = not holder and not delayed(K)
  if free and not shared then
    local fence, _, fence_n = grant(K, t, tok_hash, ttl, ttl, ARGV[3], ARGV[4], K.retention, false, value, min_hold, max_hold,
      session_member())
    event(K, 'acquired', now, ARGV[3], ARGV[4], fence, value)
    return granted_now(K, fence_n, ttl, now)
  end
  if shared and holder == '' and shared_full(K) then
    local soonest = redis.call('ZRANGE', K.readers, '0', '0', 'WITHSCORES')[2]
    return {SHARED_FULL, math.max(tonumber(soonest) - now, 0)}
  end
  if shared and (free or (holder == '' and not first_alive(K, now))) then
    local fence, _, fence_n = add_reader(K, t, now, tok_hash, ttl, ttl, ARGV[3], ARGV[4], K.retention, false, max_hold,
      session_member())
    event(K, 'acquired', now, ARGV[3], ARGV[4], fence)
    return granted_now(K, fence_n, ttl, now)
  end
end

local rank = -1
if me ~= '' then
  rank = redis.call('ZRANK', K.queue, me) or -1
end
-- Only a caller that does not wait, and the head of the queue (which looks
-- again when the lease ends), wait for the lock's lease: the others wait
-- for a hand-off.
local retry = 0
if rank <= 0 then
  retry = retry_ms(K, h.holder)
end
return {0, retry, now, rank, seq, holder == RESTING and 1 or 0}
