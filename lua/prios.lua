-- prios: queue_priorities, what inspect.lua, watch.lua and sem_inspect.lua
-- answer of a queue's waiters, and with_priorities, which appends them to a
-- lock's holders (the keys: see lib_keys.lua). A library, not
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

-- with_priorities appends the queue's priorities (queue_priorities) to
-- the holders of a lock as describe (lib_describe.lua) answers them, when
-- the lock is held and anyone waits: a lock nobody waits for costs what it
-- did. It returns holders.
local function with_priorities(holders, queue, waiters)
  if (holders[1] == MODE_EXCLUSIVE or holders[1] == MODE_SHARED) and holders[2] > 0 then
    holders[#holders + 1] = queue_priorities(queue, waiters)
  end
  return holders
end
