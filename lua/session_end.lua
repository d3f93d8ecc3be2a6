-- session_end: end a session, and name the grants the engine then
-- releases, one release script per lock (see lib_session.lua).
--
-- KEYS[1]  the session
-- KEYS[2]  on a single Redis, with a bound: the subject's count of live
--          sessions (see sessions_of.lua), which stops counting it
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the caller's subject
-- ARGV[3]  with KEYS[2]: the session's id
--
-- Returns  {GRANTED, nonce, member, ...}  ended now; every member, pending
--                              ones too (their acquire's confirm finds the
--                              session ended, and releases its grant),
--                              and those past their pending deadline (a
--                              killed gateway may have got the grant)
--          {GRANTED}           ended before, within RECORD_MS: a repeated
--                              end succeeds again, and names nothing
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}
--
-- Once ended, no grant joins, and no keep-alive extends one: whatever the
-- engine fails to release ends with its lease, at most the session's.

local f = redis.call('HMGET', KEYS[1], 'tok', 'sub', 'e')
if not f[1] then
  return {SESSION_ENDED}
end
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then
  return {SESSION_NOT_YOURS}
end
if KEYS[2] then
  redis.call('ZREM', KEYS[2], ARGV[3])
end
if f[3] then
  return {GRANTED}
end
local out = {GRANTED}
for _, v in ipairs(session_members(false)) do
  out[#out + 1] = v
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'tok', f[1], 'sub', f[2], 'e', '1')
redis.call('PEXPIRE', KEYS[1], RECORD_MS)
return out
