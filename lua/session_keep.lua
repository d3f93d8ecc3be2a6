-- session_keep: extend a session's lease, and name the grants whose
-- leases the engine extends after it (see lib_session.lua).
--
-- KEYS[1]  the session
-- KEYS[2]  on a single Redis, when the subject's sessions are counted: the
--          count (sessions_of.lua), whose end of this session moves with
--          its lease here, where it would take a call of its own
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the caller's subject
-- ARGV[3]  the new lease, ms; '0' for the one last set
-- ARGV[4]  with KEYS[2]: the session's id, as the count names it
--
-- Returns  {GRANTED, ttl_ms, nonce, member, ...}  the lease set, and each
--                              granted member ('c' .. kind .. ns/name);
--                              at most the session's cap of them; and each
--                              member whose holder released its grant
--                              ('g' .. kind .. ns/name)
--
-- Pending members past their deadline are forgotten (see lib_session.lua),
-- and so are released ones, which this call lists for the last time.
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}: nothing changed

local f, why = session_check(ARGV[1], ARGV[2])
if not f then
  return unchanged({why})
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('HSET', KEYS[1], 'ttl', ARGV[3])
else
  ttl = tonumber(f[3])
end
redis.call('PEXPIRE', KEYS[1], ttl)
local out = {GRANTED, ttl}
local now = now_ms()
if KEYS[2] then
  count_extend(KEYS[2], ARGV[4], now + ttl, now)
end
local granted, dead, released = session_members(true, now)
for i = 1, #released, 2 do
  dead[#dead + 1] = released[i]
end
session_forget(dead)
for _, v in ipairs(granted) do
  out[#out + 1] = v
end
for _, v in ipairs(released) do
  out[#out + 1] = v
end
return out
