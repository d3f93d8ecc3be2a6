-- inspect: describe the holders of a lock. Read-only (run with
-- EVALSHA_RO): shared holders whose lease ended are left out, not dropped.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib_keys.lua)
-- KEYS[2]  its queue of waiters
-- KEYS[3]  its readers (shared holders' leases)
-- ARGV[1]  how many holders to describe at most: of a lock held shared by
--          more, those whose leases end last, so that the reply's size and
--          cost are bounded whatever the number of holders
--
-- Returns  {mode, waiters, now_ms, holders, [fencing_token, ttl_ms, subject,
--          owner, acquired_at_ms, holds, hold ids, value] for each holder
--          described, the soonest lease to end first; hold ids separated by
--          spaces (holds.lua); value '' for none (a shared hold has none)}
--                mode is 'x' (one holder) or 's'; waiters counts queue
--                entries, dead ones included until a hand-off drops them;
--                holders counts the live holders, described or not
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
  local f = redis.call('HMGET', KEYS[1], 'fence', 'sub', 'own', 'at', 'hs', 'v')
  return {MODE_EXCLUSIVE, waiters, now, 1, tonumber(f[1]), redis.call('PTTL', KEYS[1]), f[2], f[3],
    tonumber(f[4]), hold_count(f[5] or nil), hold_ids(f[5] or nil), f[6] or ''}
end
local out = {MODE_SHARED, waiters, now, redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')}
local live = redis.call('ZREVRANGEBYSCORE', KEYS[3], '+inf', '(' .. now, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[1]))
for i = #live - 1, 1, -2 do
  local r = redis.call('HGET', KEYS[1], 'r:' .. live[i])
  if r then
    r = cjson.decode(r)
    for _, v in ipairs({tonumber(r.f), tonumber(live[i + 1]) - now, r.s, r.o,
        tonumber(r.a), hold_count(r.hs), hold_ids(r.hs), ''}) do
      out[#out + 1] = v
    end
  end
end
if #out == 4 then
  return {}
end
return out
