-- release: end one hold of the caller's grant, named by its id (see
-- holds.lua); the last one frees the lock (or, when shared, the caller's
-- share of it) and hands it straight to the waiters at the head of the
-- queue.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     the lock's and the gateway's options (see lock_keys); the
--             next waiter, if it waits on this gateway (K.channel) for an
--             exclusive hold, gets a full grant, told in the reply instead
--             of by a message
-- ARGV[3]     the id of the hold to end; '' for the base hold, the one the
--             acquire made; ALL_HOLDS for every hold (a session's end)
-- ARGV[4]     the id of the session whose end releases the grant, for
--             the history (absent: none; '' when ARGV[5] follows)
-- ARGV[5]     '1' when the token is a session's grant's, released by its
--             holder on a single Redis: the session marks its member
--             released when the grant ends (see session_acquire.lua;
--             absent: not)
--
-- Returns  at           released (and handed on, if anyone waits), as a bare
--                      integer: when the grant was made, ms on Redis's
--                      clock (the gateway counts how long it was held from
--                      it). The usual reply, and so the cheapest: a table
--                      of three costs Redis about 5 000 instructions more
--                      than a number
--          {1, 0, at, waiter id, fencing_token, ttl_ms, now_ms, acquired_at_ms}
--                      released, and handed in full to that waiter of the
--                      caller's gateway, which delivers it
--          {1, 0}      released within RECORD_MS before: a repeated release
--                      succeeds again, and changes nothing
--          {1, 0, at, REPEATED}
--                      this call, delivered again: it released the grant,
--                      made at at, and changes nothing now (a waiter of
--                      the caller's gateway that it handed the lock to in
--                      full learns of it from a heartbeat round)
--          {1, holds}  that hold ended now, or had ended before (then
--                      nothing changed); the caller still holds the lock
--                      that many times (see reenter.lua)
--          {0, why}    the token holds nothing: why is EXPIRED or UNKNOWN
--                      (see lib_record.lua)
--
-- Compare and delete happen in one script: in Go, the lock could expire and
-- be taken by someone else between the GET and the DEL. The hand-off costs
-- one PUBLISH to one gateway however many wait.

local K = lock_keys(ARGV[2])
K.session = ARGV[4] ~= '' and ARGV[4] or nil
guard_migrating(K.index)
-- The exclusive holder's release, the usual case, reads all it needs at
-- once (see release_all: the grant's subject, owner and fence only for a
-- history), and no clock unless it needs one (see release_all); anything
-- else looks again with current.
-- A session's grant (ARGV[5]) reads its member too (see below).
local session_grant = ARGV[5] == '1'
local f = release_fields(K, session_grant and 'sm' or nil)
local tok = f[1]
local now, t
if tok ~= ARGV[1] then
  now, t = clock()
  tok = current(K, now)
end
local r = tok == '' and reader(K, ARGV[1])
if tok ~= ARGV[1] and not r then
  local reason, at, by = why_released(K)
  if reason == RELEASED and by == CALL_ID then
    -- This call, delivered again: it answers what it did. A write of its
    -- own, so that a WAIT after it covers what the first delivery wrote,
    -- whichever connection brought that.
    redis.call('PEXPIRE', K.record, RECORD_PX)
    return {GRANTED, 0, at, REPEATED}
  elseif reason == RELEASED then
    return {GRANTED, 0}
  end
  return {NOT_GRANTED, reason}
end
local hs, hold = f[3], ARGV[3]
if r then
  hs = r.hs
end
if hold == '' then
  hold = BASE_HOLD
end
local holds = 0
if not hs and hold == BASE_HOLD then
  -- A grant never re-entered, its base hold released: the usual case,
  -- which needs none of the list's string work.
elseif hold ~= ALL_HOLDS then
  if not has_hold(hs, hold) then
    return {GRANTED, hold_count(hs)} -- ended before: a repeated release
  end
  hs = without_hold(hs, hold)
  holds = hold_count(hs)
end
if holds > 0 then
  if r then
    r.hs = hs
    redis.call('HSET', K.lock, 'r:' .. ARGV[1], cjson.encode(r))
  else
    redis.call('HSET', K.lock, 'hs', hs)
  end
  return {GRANTED, holds}
end
-- The grant's session, if session_acquire.lua noted it (the exclusive
-- grant's 'sm', or the shared hold's), learns that it was released.
local member = session_grant and (r and r.sm or not r and tok == ARGV[1] and f[K.hist_n > 0 and 8 or 5])
local at, near, g = release_all(K, t, now, ARGV[1], r, not r and f, K.retention, K.check_heard, K.channel)
member_released(member)
if near then
  return {GRANTED, 0, at + 0, near, g[2], g[3], g[4], g[5]}
end
return at + 0
