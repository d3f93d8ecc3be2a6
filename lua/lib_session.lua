-- lib_session: a session's record, and session_check, which finds the
-- caller's live session. A library of the session scripts
-- (session_*.lua), put after protocol.lua; not a script on its own. As
-- lib_keys.lua is the one description of a lock's keys, this is of a
-- session's.
--
-- KEYS[1] of every session script is the session, the prefix ..
-- 'session:{' .. id .. '}' (its own hash tag: on Redis Cluster it lives on
-- another slot than the locks its grants hold, so no script touches both;
-- the engine runs one after the other, see locks/session.go). A hash:
--   tok        SHA-256 of the session token (the id is derived from it)
--   sub        the subject that opened it
--   ttl        its lease as last set, ms
--   e          '1' once it was ended (session_end.lua): the record then
--              lives RECORD_MS more, so that a repeated end succeeds again
--   'm:' .. n  one per grant acquired in it, n the grant's nonce, from
--              which the engine derives its owner token: 'p' while its
--              acquire runs, or 'c' once granted, then 'l' (a lock's
--              hold) or 's' (a semaphore's permit), then ns/name
-- Its PEXPIRE is the session's lease; beside it, under the same hash tag,
-- the records of once.lua.
--
-- Returns  nothing: a library

-- The fields of the hash that are not members.
local SESSION_FIELDS = 3

-- session_check returns the caller's live session's fields {tok, sub,
-- ttl, e}, or nil and why not: SESSION_ENDED (gone, or ended),
-- SESSION_NOT_YOURS (another token's or another subject's).
local function session_check(tok, sub)
  local f = redis.call('HMGET', KEYS[1], 'tok', 'sub', 'ttl', 'e')
  if not f[1] then
    return nil, SESSION_ENDED
  end
  if f[1] ~= tok or f[2] ~= sub then
    return nil, SESSION_NOT_YOURS
  end
  if f[4] then
    return nil, SESSION_ENDED
  end
  return f
end

-- session_members returns {nonce, 'p'|'c' .. member, ...} of the session;
-- granted only when granted is set.
local function session_members(granted)
  local out = {}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.sub(f, 1, 2) == 'm:' and (not granted or string.sub(v, 1, 1) == 'c') then
      out[#out + 1] = string.sub(f, 3)
      out[#out + 1] = v
    end
  end
  return out
end
