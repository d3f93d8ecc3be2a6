-- set_acquire: take every lock of a lock set, or none of them, on one
-- Redis (or one Cluster slot): the uncontended case, and the first try of
-- a set that waits (see locks/lockset.go).
--
-- KEYS[1..2n] two keys a lock: KEYS[2i-1..2i] are the set's i-th lock
--             and the record of its owner token (see lib_keys.lua),
--             i = 1..n
-- ARGV[1]     lease TTL, ms
-- ARGV[2]     subject (who acquires)
-- ARGV[3]     owner label (may be empty)
-- ARGV[4]     how long the fencing counter outlives its last use, ms
-- ARGV[5]     '1' to drop a waiter whose gateway does not hear the hand-off
--             (see acquire.lua)
-- ARGV[6]     the locks' options (see lock_keys)
-- ARGV[7]     each grant's hard cap, its max hold, ms ('' for none; see
--             grant in lib_grant.lua)
-- ARGV[8..7+n] SHA-256 of each lock's owner token, in the order of KEYS
--
-- Returns  {GRANTED, ttl_ms, now_ms, fence_1, at_1, ..., fence_n, at_n}
--              every lock granted, each with its own fencing token and
--              the time it was acquired, ms
--          {NOT_GRANTED, retry_ms, now_ms, i}
--              none granted: the i-th lock is held, kept by the lock delay,
--              or free with waiters alive in its queue (whom it goes to
--              first: FIFO); retry_ms is when it may be free
--
-- Atomic because Redis runs one script at a time: every lock is looked at
-- before any is granted, so nobody, the caller included, ever sees the set
-- held in part. A lock with waiters is theirs, so this never overtakes a
-- queue; a set that must wait takes its locks one by one, in the set's
-- order, with acquire.lua.

local opts, ttl, sub, own, retention = ARGV[6], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local max_hold = ARGV[7]
if max_hold == '' then
  max_hold = nil
end
local n = #KEYS / 2
local now, t = clock()
local Ks = {}
for i = 1, n do
  local K = lock_keys_at(opts, (i - 1) * 2)
  Ks[i] = K
  -- A free lock goes to its queue first, as acquire.lua gives it.
  local h = handoff(K, t, now, current(K, now), retention, ARGV[5], nil)
  if h.holder or delayed(K) then
    return {NOT_GRANTED, math.max(retry_ms(K, h.holder), 0), now, i}
  end
end
local rp = {GRANTED, tonumber(ttl), now}
for i, K in ipairs(Ks) do
  local fence, _, fence_n = grant(K, t, ARGV[7 + i], ttl, ttl, sub, own, retention, false, nil, nil, max_hold)
  event(K, 'acquired', now, sub, own, fence)
  settle(K, fresh(fence_n, ttl, now))
  rp[#rp + 1] = fence_n
  rp[#rp + 1] = now
end
return rp
