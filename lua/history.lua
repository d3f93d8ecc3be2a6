-- history: the last events of a lock, newest first. Read-only (run with
-- EVALSHA_RO).
--
-- KEYS[1]  the lock's history (see lib_keys.lua)
-- KEYS[2]  its held key: the exclusive grant's lease end
-- ARGV[1]  how many events, at most
--
-- Returns  the events, each JSON {e, t, s, o, f} (see lib_history.lua event).
--          An exclusive lease that ended unreleased, and that no script
--          has recorded yet (nothing has run on the lock since), comes
--          first, as the next script will record it.

local out = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
local h = redis.call('GET', KEYS[2])
if h then
  h = cjson.decode(h)
  local t = redis.call('TIME')
  if tonumber(h.u) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    table.insert(out, 1, cjson.encode({e = 'expired', t = h.u, s = h.s, o = h.o, f = h.f}))
    if #out > tonumber(ARGV[1]) then
      table.remove(out)
    end
  end
end
return out
