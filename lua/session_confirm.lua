-- session_confirm: after a grant of the session was acquired, check that
-- the session still lives, and note the grant as granted (see
-- lib_session.lua).
--
-- KEYS[1]  the session
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the caller's subject
-- ARGV[3]  the grant's nonce
-- ARGV[4]  the grant: 'l' or 's', then ns/name
--
-- Returns  {GRANTED, left_ms}  what is left of the session's lease: the
--                              engine brings a longer grant's lease to it
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}: the engine releases the
--                              grant
--
-- A grant whose note a keep-alive dropped meanwhile, or forgot past its
-- pending deadline (an acquire that ran late), is noted again: it exists
-- now, and the session's end must find it. It may take the session past
-- its cap until such grants end.

-- Keyed by the grant's nonce (lua.go Keyed): its writes, delivered again,
-- write the same. The first command reads a key that never exists, which
-- stops the script on a migrating slot before it writes.
redis.call('EXISTS', KEYS[1] .. ':c:')
local f, why = session_check(ARGV[1], ARGV[2])
if not f then
  return {why}
end
redis.call('HSET', KEYS[1], 'm:' .. ARGV[3], 'c' .. ARGV[4])
redis.call('HDEL', KEYS[1], 'd:' .. ARGV[3])
return {GRANTED, redis.call('PTTL', KEYS[1])}
