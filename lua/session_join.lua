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
--
-- Returns  {GRANTED, left_ms}  noted as pending; left_ms is what is left of
--                              the session's lease, the grant's lease
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}, {SESSION_FULL}: nothing
--                              changed
--
-- The count and the note are one step, so the cap holds under any number
-- of concurrent acquires.

local f, why = session_check(ARGV[1], ARGV[2])
if not f then
  return {why}
end
if redis.call('HLEN', KEYS[1]) - SESSION_FIELDS >= tonumber(ARGV[5]) then
  return {SESSION_FULL}
end
redis.call('HSET', KEYS[1], 'm:' .. ARGV[3], 'p' .. ARGV[4])
return {GRANTED, redis.call('PTTL', KEYS[1])}
