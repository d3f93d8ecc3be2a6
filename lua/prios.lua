-- prios: queue_priorities, what inspect.lua, watch.lua and sem_inspect.lua
-- answer of a queue's waiters (the keys: see lib_keys.lua). A library, not
-- a script on its own; read-only.

-- queue_priorities returns, for a queue (K.queue, see lib_keys.lua) and
-- its waiters' requests (K.waiters), one digit per waiter: the priority it
-- asked for (0 to 9; 0 for none), in serving order, the first 100 at most.
local function queue_priorities(queue, waiters)
  local ids = redis.call('ZRANGE', queue, 0, 99)
  local prios = {}
  if #ids > 0 then
    local ws = redis.call('HMGET', waiters, unpack(ids))
    for i = 1, #ids do
      prios[i] = ws[i] and string.match(ws[i], '"pr":"(%d)"') or '0'
    end
  end
  return table.concat(prios)
end
