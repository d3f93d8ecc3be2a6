-- history: the last events of a lock, newest first. Read-only (run with
-- EVALSHA_RO).
--
-- KEYS[1]  the lock's name record (see lib_keys.lua)
-- ARGV[1]  how many events, at most
--
-- Returns  the events, each JSON {i, e, t, s, o, f, ...}, the numbers as
--          strings (see lib_history.lua event_json). An exclusive lease
--          that ended unreleased, and that no script has recorded yet
--          (nothing has run on the lock since), comes first, as the next
--          script will record it.

local rec = parse_record(redis.call('GET', KEYS[1]))
local out, note = history_of(rec, tonumber(ARGV[1])), rec.note
if note then
  if note[1] <= now_ms() then
    local e = 'expired'
    if note[5] then
      e = 'broken'
    elseif note[6] and note[1] >= note[6] then
      e = 'max_hold' -- its hard cap ended it (lib_history.lua check_expired)
    end
    table.insert(out, 1, event_json({KIND_CODES[e], note[1], note[2], note[3], note[4], false, note[5] or false}, rec.i + 1))
  end
end
while #out > tonumber(ARGV[1]) do
  table.remove(out)
end
return out
