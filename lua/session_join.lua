-- session_join: note a grant about to be acquired in the session, before
-- it exists, so that an end of the session that runs meanwhile finds it
-- (see lib_session.lua).
--
-- KEYS[1]  the session
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the caller's subject
-- ARGV[3]  the grant's nonce
-- ARGV[4]  the grant: 'l' or 's', then ns/name
-- ARGV[5]  how many grants the session may hold at most
-- ARGV[6]  how long the grant's acquire may run, ms: its member's pending
--          deadline is that much from now
--
-- Returns  {GRANTED, left_ms}  noted as pending; left_ms is what is left of
--                              the session's lease, the grant's lease
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}, {SESSION_FULL}: nothing
--                              changed
--
-- The count and the note are one step, so the cap holds under any number
-- of concurrent acquires. The count is the hash's length, which a pending
-- member counts twice in (its deadline); only a session that looks full
-- is read whole, and its pending members past their deadline forgotten.

-- Keyed by the grant's nonce (lua.go Keyed): the first command reads a
-- key that never exists, which stops the script on a migrating slot
-- before it writes; a join whose member is noted already (this call
-- delivered again, or late, after its confirm) changes nothing.
redis.call('EXISTS', KEYS[1] .. ':c:')
local f, why = session_check(ARGV[1], ARGV[2])
if not f then
  return {why}
end
if redis.call('HEXISTS', KEYS[1], 'm:' .. ARGV[3]) == 1 then
  return {GRANTED, redis.call('PTTL', KEYS[1])}
end
local now = now_ms()
if session_full(tonumber(ARGV[5]), nil, now) then
  return {SESSION_FULL}
end
redis.call('HSET', KEYS[1], 'm:' .. ARGV[3], 'p' .. ARGV[4], 'd:' .. ARGV[3], now + tonumber(ARGV[6]))
return {GRANTED, redis.call('PTTL', KEYS[1])}
