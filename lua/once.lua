-- once: wraps every script that changes state, so that each call has one
-- effect however often Redis receives it (a client that re-sends a command
-- whose reply it lost, a retried cleanup). Not a script on its own: lua.go
-- puts the script's body in a function, main, and this file after it.
--
-- KEYS[1]     the script's own first key; the call's record lives beside
--             it, under the same hash tag: KEYS[1] .. ':c:' .. call id
-- ARGV[n-2]   the call id: unique per logical call, made by the gateway
-- ARGV[n-1]   the id of an earlier call to fence off ('' for none): a
--             cleanup names the call whose outcome it did not learn, so
--             that the call, should Redis receive it only now, does nothing
-- ARGV[n]     how long a call's record lives, ms (the bound: a delivery
--             later than that after the first runs as a new call)
--
-- Returns  what main returned the first time this call id ran; FENCED when
--          the call was fenced off before it ran
--
-- The three arguments are taken off ARGV before main runs, so each script
-- sees only its own. The record is the reply, packed with cmsgpack (cjson
-- would round a fencing token to 14 digits).

local call_ms = table.remove(ARGV)
local fence_id = table.remove(ARGV)
local call_id = table.remove(ARGV)
local base = KEYS[1] .. ':c:'
if fence_id ~= '' then
  redis.call('SET', base .. fence_id, cmsgpack.pack(FENCED), 'NX', 'PX', call_ms)
end
local record = base .. call_id
local kept = redis.call('GET', record)
if kept then
  -- A write of its own, so that a WAIT after this delivery covers what the
  -- first delivery wrote, whichever connection brought that one.
  redis.call('PEXPIRE', record, call_ms)
  return cmsgpack.unpack(kept)
end
local reply = main()
for _, f in ipairs(AFTER_MAIN) do
  f(reply)
end
redis.call('SET', record, cmsgpack.pack(reply), 'PX', call_ms)
return reply
