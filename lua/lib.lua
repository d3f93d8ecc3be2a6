-- lib: functions shared by the scripts. Not a script on its own: lua.go puts
-- this file in front of every script, since Redis scripts cannot import.
--
-- The keys of one lock, all with the hash tag {ns/name} (K below):
--   K.lock     hash: tok (SHA-256 of the owner token), fence, sub, own,
--              at (acquired, ms on the Redis clock), ttl (as asked for);
--              its PEXPIRE is the lease
--   K.fence    the last fencing token handed out
--   K.queue    zset: waiter id -> arrival number (FIFO order)
--   K.alive    zset: waiter id -> ms until which the waiter counts as alive
--   K.waiters  hash: waiter id -> JSON {g: its gateway's channel, t: token
--              hash, ttl, s: subject, o: owner label, d: wait deadline ms};
--              field '#seq' numbers arrivals
--
-- Fencing tokens are stored as strings made with string.format('%d'):
-- tostring would print a double in 14 digits and round them.

local function keys_of(lock, fence, queue, alive, waiters)
  return {lock = lock, fence = fence, queue = queue, alive = alive, waiters = waiters}
end

-- clock returns the Redis time in ms, and as TIME's {seconds, microseconds}.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

-- next_fence returns a fencing token larger than every one handed out
-- before, as a string: the larger of the counter plus one and the Redis
-- clock in microseconds. The counter covers many grants within one
-- microsecond and a clock that steps back; the clock covers a counter that
-- is missing or behind: evicted, flushed, restored from stale persistence,
-- or on a replica promoted before it received the last grants. The clock
-- half holds as long as the clock of the Redis that grants is not behind the
-- clock of the one that granted before by more than the time between their
-- grants. Microseconds since 1970 stay below 2^53 until the year 2255, so
-- Lua's doubles hold them exactly.
local function next_fence(K, t, retention)
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', K.fence) or '0') or 0
  local fence = string.format('%d', math.max(last + 1, us))
  redis.call('SET', K.fence, fence, 'PX', retention)
  return fence
end

-- grant makes the lock held by the given token hash, and returns the new
-- fencing token.
local function grant(K, t, tok, ttl, sub, own, retention)
  local fence = next_fence(K, t, retention)
  local at = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
  redis.call('HSET', K.lock, 'tok', tok, 'fence', fence,
    'sub', sub, 'own', own, 'at', at, 'ttl', ttl)
  redis.call('PEXPIRE', K.lock, ttl)
  return tonumber(fence)
end

local function dequeue(K, id)
  redis.call('ZREM', K.queue, id)
  redis.call('ZREM', K.alive, id)
  redis.call('HDEL', K.waiters, id)
end

-- handoff gives the free lock to the first waiter still alive and tells that
-- waiter's gateway, with one message on the gateway's own channel:
-- "<waiter id> <fencing token> <ttl ms> <now ms>". Dead waiters met on the
-- way are dropped: past their deadline or heartbeat, or (when check_heard is
-- '1') whose gateway no longer listens. Returns the waiter's id, or nil when
-- nobody alive waits.
local function handoff(K, t, now, retention, check_heard)
  while true do
    local id = redis.call('ZRANGE', K.queue, 0, 0)[1]
    if not id then
      return nil
    end
    local alive = tonumber(redis.call('ZSCORE', K.alive, id))
    local w = redis.call('HGET', K.waiters, id)
    dequeue(K, id)
    if w and alive and alive > now then
      local e = cjson.decode(w)
      local fence = grant(K, t, e.t, e.ttl, e.s, e.o, retention)
      local heard = redis.call('PUBLISH', e.g,
        id .. ' ' .. string.format('%d', fence) .. ' ' .. e.ttl .. ' ' .. string.format('%d', now))
      if heard > 0 or check_heard ~= '1' then
        return id
      end
      redis.call('DEL', K.lock) -- its gateway is gone: the grant would sit unused
    end
  end
end

