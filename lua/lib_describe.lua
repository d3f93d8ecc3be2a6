-- lib_describe: describe, the holders of a lock as inspect.lua and
-- watch.lua answer them, and index_at, the lock's index as inspect.lua
-- answers it (the keys: see lib_keys.lua). A library, not a script on its
-- own; read-only.

-- describe returns, for the lock hash lock, its queue and its readers,
-- {mode, waiters, now_ms, holders, [fencing_token, ttl_ms, subject,
-- owner, acquired_at_ms, holds, hold ids, value, hard cap] for each holder
-- described, the soonest lease to end first}, or {} when nobody holds it.
-- Of a lock held shared by more than most holders, those whose leases end
-- last, so that the reply's size and cost are bounded. Shared holders
-- whose lease ended are left out, not dropped; token hashes never appear.
-- A holder's hard cap is its cap (lib_grant.lua grant), ms on the Redis
-- clock, or 0 for none. A lock that a released grant's min hold keeps
-- from others (see lib_handoff.lua rest) is {MODE_RESTING, until ms}.
local function describe(lock, queue, readers, now, most)
  local tok = redis.call('HGET', lock, 'tok')
  if not tok then
    return {}
  elseif tok == RESTING then
    return {MODE_RESTING, tonumber(redis.call('HGET', lock, 'mh'))}
  end
  local waiters = redis.call('ZCARD', queue)
  if tok ~= '' then
    local f = redis.call('HMGET', lock, 'fence', 'sub', 'own', 'at', 'hs', 'v', 'cap')
    return {MODE_EXCLUSIVE, waiters, now, 1, tonumber(f[1]), redis.call('PTTL', lock), f[2], f[3],
      tonumber(f[4]), hold_count(f[5] or nil), hold_ids(f[5] or nil), f[6] or '', tonumber(f[7]) or 0}
  end
  local out = {MODE_SHARED, waiters, now, redis.call('ZCOUNT', readers, '(' .. now, '+inf')}
  local live = redis.call('ZREVRANGEBYSCORE', readers, '+inf', '(' .. now, 'WITHSCORES',
    'LIMIT', 0, tonumber(most))
  for i = #live - 1, 1, -2 do
    local r = redis.call('HGET', lock, 'r:' .. live[i])
    if r then
      r = cjson.decode(r)
      for _, v in ipairs({tonumber(r.f), tonumber(live[i + 1]) - now, r.s, r.o,
          tonumber(r.a), hold_count(r.hs), hold_ids(r.hs), '', tonumber(r.cap) or 0}) do
        out[#out + 1] = v
      end
    end
  end
  if #out == 4 then
    return {}
  end
  return out
end

-- index_at returns the index (lib_history.lua push_events) of the lock
-- whose name record is fence and whose readers are readers, as the first
-- script to write to it now would find it: the record's, plus the events
-- that script records before anything else (lib_grant.lua current) unless
-- the lock hash names an exclusive holder or a min hold (owned): the
-- exclusive lease that ended unreleased (check_expired), and each shared
-- lease that ended (purge_ended). So a watch from the index that inspect.lua answers waits
-- for the next change, where it would answer at once with an expiry that
-- happened before the read. 0 while the record keeps no history (the
-- first event numbers it from the clock). Read-only: one GET, and a
-- ZCOUNT when the lock hash names neither.
local function index_at(fence, readers, owned, now)
  local index, note = record_index(redis.call('GET', fence), not owned)
  if index == 0 or owned then
    return index
  end
  if note and note[1] <= now then
    index = index + 1
  end
  return index + redis.call('ZCOUNT', readers, '-inf', now)
end
