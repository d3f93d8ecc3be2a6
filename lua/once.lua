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
-- A keyed script (KEYED, see lua.go Script.Keyed) keeps no record: each of
-- its writes is keyed by an id the gateway chose before sending (an owner
-- token, a hold id, CALL_ID), so a re-sent call finds its own effect in
-- the lock's state and does nothing more (see the script). It still
-- fences off other calls and runs AFTER_MAIN here. The first command of
-- every other script here reads a key that does not exist (its record),
-- the one Redis refuses while its slot migrates on Cluster ("non local
-- key"): so such a script stops before it writes, not half way. A keyed
-- script makes such a read its own first command (guard_migrating in
-- lib_record.lua).
--
-- A keyed script takes one argument instead of the three: the call id, or
-- the call id, the id to fence off and how long the fence lives, with a
-- space between (locks/redisbackend keyedArgs): it needs no record's
-- lifetime, and a call rarely fences another off.
--
-- A refusal that changed nothing, and never will (main returned it through
-- unchanged, see protocol.lua), keeps no record either: there is no effect
-- to repeat, and its SET was most of what a refused renewal cost.
--
-- The arguments are taken off ARGV before main runs, so each script sees
-- only its own. The record is the reply, packed with cmsgpack (cjson
-- would round a fencing token to 14 digits).

-- (Indexing, not table.remove: a call of Lua's library costs more than a
-- few of its own instructions, and this runs on every call.)
local n = #ARGV
local call_ms, fence_id, call_id
if KEYED then
  call_id, fence_id, ARGV[n] = ARGV[n], '', nil
  if string.find(call_id, ' ', 1, true) then
    call_id, fence_id, call_ms = string.match(call_id, '^(%S+) (%S+) (%d+)$')
  end
else
  call_ms, fence_id, call_id = ARGV[n], ARGV[n - 1], ARGV[n - 2]
  ARGV[n], ARGV[n - 1], ARGV[n - 2] = nil, nil, nil
end
if fence_id ~= '' then
  redis.call('SET', KEYS[1] .. ':c:' .. fence_id, cmsgpack.pack(FENCED), 'NX', 'PX', call_ms)
end
CALL_ID = call_id
local record = not KEYED and KEYS[1] .. ':c:' .. call_id
if record then
  local kept = redis.call('GET', record)
  if kept then
    -- A write of its own, so that a WAIT after this delivery covers what the
    -- first delivery wrote, whichever connection brought that one.
    redis.call('PEXPIRE', record, call_ms)
    return cmsgpack.unpack(kept)
  end
end
UNCHANGED = false
local reply = main()
for i = 1, #AFTER_MAIN do
  AFTER_MAIN[i](reply)
end
if record and not UNCHANGED then
  redis.call('SET', record, cmsgpack.pack(reply), 'PX', call_ms)
end
return reply
