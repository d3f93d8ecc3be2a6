-- watching: a gateway says it watches a lock, or no longer does, in the
-- lock's watch registry (K.lock .. ':w', see lib_keys.lua), so that the
-- scripts that record the lock's events send it a hint (lib_history.lua
-- push_events). Advisory: no script that grants or ends a lock reads it;
-- a hint only makes a gateway read again (watch.lua).
--
-- KEYS[1]    the lock (see lib_keys.lua); the registry is K.lock .. ':w'
-- ARGV[1]     the gateway's channel
-- ARGV[2]     how long from now it watches, ms (its next call renews it);
--             0: it stops watching
-- ARGV[3]     the lock's options (see lock_keys)
--
-- Returns  how many gateways watch the lock now
--
-- Each call drops the entries whose time has passed (a gateway that died),
-- and the registry lives as long as its latest entry: a lock nobody
-- watches keeps none. The lock's name record notes when that is (w, see
-- lib_fence.lua), so that a script that records an event of a lock nobody
-- watches does not read the registry. Running it twice changes nothing
-- more.

local K = lock_keys(ARGV[3])
local registry = K.lock .. ':w'
local now = clock()
local ms = tonumber(ARGV[2])
if ms > 0 then
  redis.call('ZADD', registry, string.format('%d', now + ms), ARGV[1])
else
  redis.call('ZREM', registry, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', registry, '-inf', now)
local last = tonumber(redis.call('ZRANGE', registry, '-1', '-1', 'WITHSCORES')[2])
if last then
  redis.call('PEXPIRE', registry, last - now)
end
if K.hist_n > 0 then
  local rec = record(K)
  if rec.w ~= (last or 0) then
    rec.w, rec.dirty = last or 0, true
  end
  flush_records()
end
return redis.call('ZCARD', registry)
