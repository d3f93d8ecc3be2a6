-- lib_session: a session's record, and session_check, which finds the
-- caller's live session. A library of the session scripts
-- (session_*.lua), put after protocol.lua; not a script on its own. As
-- lib_keys.lua is the one description of a lock's keys, this is of a
-- session's.
--
-- KEYS[1] of every session script is the session, the prefix ..
-- 'session:{' .. id .. '}' (its own hash tag: on Redis Cluster it lives on
-- another slot than the locks its grants hold, so no script touches both
-- there, and the engine runs one after the other, see locks/session.go;
-- on a single Redis session_acquire.lua does both at once). A hash:
--   tok        SHA-256 of the session token (the id is derived from it)
--   sub        the subject that opened it
--   ttl        its lease as last set, ms
--   e          '1' once it was ended (session_end.lua): the record then
--              lives RECORD_MS more, so that a repeated end succeeds again
--   'm:' .. n  one per grant acquired in it, n the grant's nonce, from
--              which the engine derives its owner token: 'p' while its
--              acquire runs, or 'c' once granted, or 'g' once its holder
--              released it (release.lua, for a grant that
--              session_acquire.lua took: the next keep-alive lists it
--              gone, renewing nothing, and forgets it), then 'l' (a
--              lock's hold) or 's' (a semaphore's permit), then ns/name
--   'd:' .. n  one per pending member (session_join.lua): its deadline, ms
--              on the Redis clock. Past it, its acquire is taken for one
--              whose gateway died (killed while it waited): the member
--              no longer counts against the cap, is not listed, and the
--              next join that finds the session full, or keep-alive,
--              forgets it. session_confirm.lua deletes it; a late confirm
--              notes its member again. A member's value is what it was
--              before deadlines, so that a gateway of the previous version
--              reads members as they are (it counts this field against the
--              cap, as one more member, and never forgets a member).
-- Its PEXPIRE is the session's lease; beside it, under the same hash tag,
-- the records of once.lua.
--
-- Returns  nothing: a library

-- The fields of the hash that are not members.
local SESSION_FIELDS = 3

-- session_check returns the caller's live session's fields {tok, sub,
-- ttl}, or nil and why not: SESSION_ENDED (gone, or ended),
-- SESSION_NOT_YOURS (another token's or another subject's). A live
-- session has its ttl, and an ended one has none (session_end.lua keeps
-- {tok, sub, e} of it): the one field says both, where reading e too cost
-- every session call a field (about 1 500 Redis instructions).
local function session_check(tok, sub)
  local f = redis.call('HMGET', KEYS[1], 'tok', 'sub', 'ttl')
  if not f[1] then
    return nil, SESSION_ENDED
  end
  if f[1] ~= tok or f[2] ~= sub then
    return nil, SESSION_NOT_YOURS
  end
  if not f[3] then
    return nil, SESSION_ENDED
  end
  return f
end

-- session_members returns {nonce, 'p'|'c' .. member, ...} of the session
-- (granted ones only when granted is set), the nonces of the pending
-- members whose deadline is before now, and {nonce, 'g' .. member, ...}
-- of the members whose grant its holder released (release.lua). Neither
-- of the last two is in the list; with now nil, none is dead.
local function session_members(granted, now)
  local all = redis.call('HGETALL', KEYS[1])
  local dead = {}
  if now then
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'd:' and tonumber(all[i + 1]) <= now then
        dead[string.sub(all[i], 3)] = true
      end
    end
  end
  local out, gone, released = {}, {}, {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.sub(f, 1, 2) == 'm:' then
      local n, state = string.sub(f, 3), string.sub(v, 1, 1)
      if state == 'p' and dead[n] then
        gone[#gone + 1] = n
      elseif state == 'g' then
        released[#released + 1] = n
        released[#released + 1] = v
      elseif not granted or state == 'c' then
        out[#out + 1] = n
        out[#out + 1] = v
      end
    end
  end
  return out, gone, released
end

-- session_forget forgets the members of nonces, and their deadlines.
local function session_forget(nonces)
  if #nonces == 0 then
    return
  end
  local fields = {}
  for _, n in ipairs(nonces) do
    fields[#fields + 1] = 'm:' .. n
    fields[#fields + 1] = 'd:' .. n
  end
  redis.call('HDEL', KEYS[1], unpack(fields))
end

-- session_full says whether the session holds most grants, with its
-- pending members past their deadline (now, or the Redis clock when nil)
-- not counted, and forgotten. Only a session whose length says it may be
-- full is read whole (a pending member counts twice in the length: its
-- deadline). member, when set, is the caller's own, noted already by this
-- call delivered before: it counts against no cap.
local function session_full(most, member, now)
  if redis.call('HLEN', KEYS[1]) - SESSION_FIELDS < most then
    return false
  end
  if member and redis.call('HEXISTS', KEYS[1], member) == 1 then
    return false
  end
  local live, dead = session_members(false, now or now_ms())
  session_forget(dead)
  return #live / 2 >= most
end
