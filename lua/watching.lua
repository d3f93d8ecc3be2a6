-- watching: a gateway says it watches a lock, or no longer does, in the
-- lock's watch registry (K.lock .. ':w', see lib_keys.lua), so that the
-- scripts that record the lock's events send it a hint (lib_history.lua
-- push_events). Advisory: no script that grants or ends a lock reads it;
-- a hint only makes a gateway read again (watch.lua).
--
-- KEYS[1]  the lock's watch registry
-- ARGV[1]  the gateway's channel
-- ARGV[2]  how long from now it watches, ms (its next call renews it);
--          0: it stops watching
--
-- Returns  how many gateways watch the lock now
--
-- Each call drops the entries whose time has passed (a gateway that died),
-- and the registry lives as long as its latest entry: a lock nobody
-- watches keeps none. Running it twice changes nothing more.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = tonumber(ARGV[2])
if ms > 0 then
  redis.call('ZADD', KEYS[1], string.format('%d', now + ms), ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], '-1', '-1', 'WITHSCORES')[2]
if last then
  redis.call('PEXPIRE', KEYS[1], tonumber(last) - now)
end
return redis.call('ZCARD', KEYS[1])
