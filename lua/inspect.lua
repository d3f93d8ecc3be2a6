-- inspect: describe the holders of a lock, and its index. Read-only (run
-- with EVALSHA_RO): shared holders whose lease ended are left out, not
-- dropped.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib_keys.lua)
-- KEYS[2]  its queue of waiters
-- KEYS[3]  its readers (shared holders' leases)
-- KEYS[4]  its name record (K.fence, see lib_fence.lua record)
-- ARGV[1]  how many holders to describe at most: of a lock held shared by
--          more, those whose leases end last, so that the reply's size and
--          cost are bounded whatever the number of holders
-- ARGV[2]  '1' when the gateway keeps a history (--history above 0), which
--          numbers the lock's events; '0' when it keeps none: the index
--          is 0, and the record is not read
--
-- Returns  {mode, waiters, now_ms, holders, [fencing_token, ttl_ms,
--          subject, owner, acquired_at_ms, holds, hold ids, value] for
--          each holder described, the soonest lease to end first, index;
--          hold ids separated by spaces (holds.lua); value '' for none (a
--          shared hold has none)}
--                mode is 'x' (one holder) or 's'; waiters counts queue
--                entries, dead ones included until a hand-off drops them;
--                holders counts the live holders, described or not; index
--                is the lock's index as a watch would find it now (see
--                index_at), last, so that the reply is built in place
--          ... as above, then the queue's priorities, then index, when
--                anyone waits: one digit per waiter, the priority it asked
--                for (0 to 9), in serving order, the first 100 at most
--          {MODE_RESTING, until_ms, index}
--                not held, and kept from new holders until then by a
--                released grant's min hold
--          {index}  not held
--
-- Token hashes are never returned (see lib_describe.lua). One call reads
-- the holders and the index, so that the index is the one of the state
-- described: a watch from it answers at the next change.

local now = clock()
local out = describe(KEYS[1], KEYS[2], KEYS[3], now, ARGV[1])
with_priorities(out, KEYS[2], KEYS[1] .. ':waiters') -- K.waiters
local index = 0
if ARGV[2] == '1' then
  -- An exclusive holder, or a min hold: the lock hash names one, and the
  -- first script to write records nothing before it reads it (current).
  index = index_at(KEYS[4], KEYS[3], out[1] == MODE_EXCLUSIVE or out[1] == MODE_RESTING, now)
end
out[#out + 1] = index
return out
