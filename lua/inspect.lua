-- inspect: describe the holder of a lock. Read-only (run with EVALSHA_RO).
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- KEYS[2]  its queue of waiters
--
-- Returns  {fencing_token, pttl_ms, subject, owner, acquired_at_ms, waiters,
--           holds}
--                held; waiters counts queue entries, dead ones included
--                until a hand-off drops them; holds counts the holder's
--                re-entrant holds
--          {}    not held
--
-- The token hash is never returned.

local f = redis.call('HMGET', KEYS[1], 'fence', 'sub', 'own', 'at', 'holds')
if not f[1] then
  return {}
end
return {tonumber(f[1]), redis.call('PTTL', KEYS[1]), f[2], f[3], tonumber(f[4]),
  redis.call('ZCARD', KEYS[2]), tonumber(f[5]) or 1}
