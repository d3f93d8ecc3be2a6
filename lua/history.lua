-- history: the last events of a lock, newest first. Read-only (run with
-- EVALSHA_RO).
--
-- KEYS[1]  the lock's name record (see lib_keys.lua)
-- KEYS[2]  its held key: the exclusive grant's lease end
-- ARGV[1]  how many events, at most
--
-- Returns  the events, each JSON {i, e, t, s, o, f, ...}, the numbers as
--          strings (see lib_history.lua event_json). An exclusive lease
--          that ended unreleased, and that no script has recorded yet
--          (nothing has run on the lock since), comes first, as the next
--          script will record it.

local out, index = history_of(redis.call('GET', KEYS[1]))
local h = redis.call('GET', KEYS[2])
if h then
  h = cjson.decode(h)
  local t = redis.call('TIME')
  if tonumber(h.u) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    table.insert(out, 1, cjson.encode({i = string.format('%d', index + 1), e = 'expired', t = h.u, s = h.s, o = h.o, f = h.f}))
  end
end
while #out > tonumber(ARGV[1]) do
  table.remove(out)
end
return out
