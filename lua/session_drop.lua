-- session_drop: forget grants of a live session: those whose acquire
-- failed, and those a keep-alive found ended (see lib_session.lua).
--
-- KEYS[1]     the session
-- ARGV[1]     SHA-256 of the session token
-- ARGV[2..n]  the grants' nonces
--
-- Returns  how many fields it deleted: a member, and its pending
--          deadline if it had one
--
-- Not wrapped by once.lua: an HDEL of unique nonces has one effect
-- however often it runs, and a session that ended keeps no grants.

local f = redis.call('HMGET', KEYS[1], 'tok', 'e')
if f[1] ~= ARGV[1] or f[2] then
  return 0
end
local fields = {}
for i = 2, #ARGV do
  fields[#fields + 1] = 'm:' .. ARGV[i]
  fields[#fields + 1] = 'd:' .. ARGV[i]
end
return redis.call('HDEL', KEYS[1], unpack(fields))
