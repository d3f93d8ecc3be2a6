-- lib_fence: the Redis clock, as every lock and semaphore script reads it,
-- and fencing tokens (K.fence: see lib_keys.lua). A library, not a script
-- on its own.

-- CLOCK.now is the Redis time in ms as clock last read it.
local CLOCK = {}

-- clock returns the Redis time in ms, and as TIME's {seconds, microseconds}.
local function clock()
  local t = redis.call('TIME')
  CLOCK.now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return CLOCK.now, t
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
--
-- One SET ... GET writes the clock and reads the counter; only when the
-- counter is not behind the clock (many grants in one microsecond, or a
-- clock that stepped back) does a second SET put the counter plus one.
local function next_fence(K, t, retention)
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fence = string.format('%d', us)
  local last = tonumber(redis.call('SET', K.fence, fence, 'PX', retention, 'GET') or '0') or 0
  if last >= us then
    fence = string.format('%d', last + 1)
    redis.call('SET', K.fence, fence, 'PX', retention)
  end
  return fence
end

-- at_ms is TIME's {seconds, microseconds} as ms, a string.
local function at_ms(t)
  return t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
end
