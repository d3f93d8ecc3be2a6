-- session_get: describe a live session (see lib_session.lua).
--
-- KEYS[1]  the session
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the caller's subject
--
-- Returns  {GRANTED, left_ms, ttl_ms, nonce, member, ...}  every member,
--                              'p' (pending) or 'c' (granted) .. kind ..
--                              ns/name; not the pending ones past
--                              their deadline (read-only: the next join
--                              or keep-alive forgets them)
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}

local f, why = session_check(ARGV[1], ARGV[2])
if not f then
  return {why}
end
local out = {GRANTED, redis.call('PTTL', KEYS[1]), tonumber(f[3])}
for _, v in ipairs((session_members(false, now_ms()))) do
  out[#out + 1] = v
end
return out
