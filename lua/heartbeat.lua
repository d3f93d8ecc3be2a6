-- heartbeat: a gateway says its waiters on one lock are still there, learns
-- which of them are no longer queued, and hands on a lock whose lease ran
-- out.
--
-- KEYS[1]     the lock (see lib_keys.lua)
-- ARGV[1]     how long a waiter counts as alive without a heartbeat, ms
-- ARGV[2]     how long the fencing counter outlives its last use, ms
-- ARGV[3]     '1' to drop a waiter whose gateway does not hear the hand-off
-- ARGV[4]     the lock's options (see lock_keys)
-- ARGV[5..]   the waiter ids
--
-- Returns  one number per waiter id, in order: 1 still queued, 0 not
--          queued (the lock was handed to it, or it was dropped): its
--          gateway runs its acquire again, which picks up the grant or
--          rejoins the queue in its old place
--
-- A waiter whose gateway died stops being renewed; the hand-off skips it
-- once its alive time passes, so it delays the queue by at most that long.
-- A lease that ends publishes nothing: every gateway with waiters looks
-- once a heartbeat, so the queue moves on within one heartbeat of the end,
-- whether the lease was a holder's or a hand-off nobody picked up.

local K = lock_keys(ARGV[4])
local now, t = clock()
local holder = current(K, now)
keep_alive(K, now, ARGV[1], ARGV, 5)
handoff(K, t, now, holder, ARGV[2], ARGV[3], nil)
return still_queued(K, ARGV, 5)
