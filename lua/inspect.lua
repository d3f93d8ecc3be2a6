-- inspect: describe the holders of a lock. Read-only (run with
-- EVALSHA_RO): shared holders whose lease ended are left out, not dropped.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- KEYS[2]  its queue of waiters
-- KEYS[3]  its readers (shared holders' leases)
--
-- Returns  {mode, waiters, now_ms, [fencing_token, ttl_ms, subject, owner,
--          acquired_at_ms, holds, hold ids] for each holder, the soonest
--          lease to end first; hold ids separated by spaces (holds.lua)}
--                mode is 'x' (one holder) or 's'; waiters counts queue
--                entries, dead ones included until a hand-off drops them
--          {}    not held
--
-- Token hashes are never returned.

local tok = redis.call('HGET', KEYS[1], 'tok')
if not tok then
  return {}
end
local now = clock()
local waiters = redis.call('ZCARD', KEYS[2])
if tok ~= '' then
  local f = redis.call('HMGET', KEYS[1], 'fence', 'sub', 'own', 'at', 'hs')
  return {'x', waiters, now, tonumber(f[1]), redis.call('PTTL', KEYS[1]), f[2], f[3],
    tonumber(f[4]), hold_count(f[5] or nil), hold_ids(f[5] or nil)}
end
local out = {'s', waiters, now}
local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local r = redis.call('HGET', KEYS[1], 'r:' .. live[i])
  if r then
    r = cjson.decode(r)
    for _, v in ipairs({tonumber(r.f), tonumber(live[i + 1]) - now, r.s, r.o,
        tonumber(r.a), hold_count(r.hs), hold_ids(r.hs)}) do
      out[#out + 1] = v
    end
  end
end
if #out == 3 then
  return {}
end
return out
