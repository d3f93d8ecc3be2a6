-- leave: a waiter gives up (its wait ran out, its caller went away, or the
-- outcome of its last call is unknown).
--
-- KEYS[1..2]  the lock, and the waiter's record (see lib_keys.lua)
-- ARGV[1]     the waiter id; may be empty (an acquire that did not wait)
-- ARGV[2]     SHA-256 of the waiter's owner token
-- ARGV[3]     '1' to release a grant this token holds (nobody will receive
--             it), '0' to pick it up
-- ARGV[4]     how long the fencing counter outlives its last use, ms
-- ARGV[5]     '1' to drop a waiter whose gateway does not hear a hand-off
-- ARGV[6]     the lock's options (see lock_keys)
--
-- Returns  {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, 1}
--              the lock was handed to this waiter before it left, and is
--              now picked up: the caller has it
--          {2}                  it had the lock, and released it (handing
--                               it to the next waiter)
--          {0, retry_ms, now_ms, -1, 0, resting}
--                               it left the queue without the lock;
--                               resting is 1 when a released grant's
--                               min hold keeps it (see acquire.lua)
--
-- Leaving and checking happen in one script: a hand-off cannot slip in
-- between, and nothing is released on the strength of a message. A waiter
-- that leaves may have blocked shared ones behind it: the hand-off runs.

local K = lock_keys(ARGV[6])
local now, t = clock()
local tok = current(K, now)
if ARGV[1] ~= '' then
  dequeue(K, ARGV[1])
end
local r = tok == '' and reader(K, ARGV[2])
if tok == ARGV[2] or r then
  if ARGV[3] == '1' then
    release_all(K, t, now, ARGV[2], r, nil, ARGV[4], ARGV[5])
    return {2}
  end
  if r then
    return settle(K, reader_reply(K, now, ARGV[2], r, 1))
  end
  pick_up(K, now)
  return settle(K, held_by(K, now))
end
-- The token's wait is over for good: a call of it that Redis receives only
-- now (one whose outcome was unknown, or a late re-send) takes nothing.
fenced(K)
handoff(K, t, now, tok, ARGV[4], ARGV[5], nil)
return {0, retry_ms(K, tok), now, -1, 0, tok == RESTING and 1 or 0}
