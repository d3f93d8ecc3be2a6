-- watch: what changed on a lock since the index a gateway last saw: the
-- events after it and the lock's holders now, one read that the gateway
-- hands to all its watchers of the lock (see locks/redisbackend/watch.go).
--
-- KEYS[1]     the lock (see lib_keys.lua)
-- ARGV[1]     the lock's options (see lock_keys)
-- ARGV[2]     the index the gateway has seen (0: none)
-- ARGV[3]     how many holders to describe at most (see describe)
--
-- Returns  {index, events, holders, first}: the lock's index (its newest
--          event's number i, 0 while it keeps none); the events numbered
--          above ARGV[2], newest first, as the history holds them (JSON,
--          see lib_history.lua event), or every event kept when the index
--          is below ARGV[2] (the history was lost and began again); the
--          holders as inspect.lua describes them ({} when free), the
--          queue's priorities after them when anyone waits; and 1 when
--          the oldest event kept is the first of the lock's history (or
--          none is kept), else 0 (see lib_history.lua history_of)
--
-- It writes what any lock script writes first (current): a lease that
-- ended unreleased is recorded as expired, and that record's hint wakes
-- the other gateways that watch. That is why a gateway runs it at a
-- lease's end. Running it twice changes nothing more, so once.lua does
-- not wrap it; it hands nothing on (the waiters' own scripts do).

local K = lock_keys(ARGV[1])
local now = clock()
current(K, now)
local after = tonumber(ARGV[2])
local rec = record(K) -- as current left it: the expiry it may have recorded included
flush_records()
local kept, first = history_of(rec, K.hist_n)
local index = rec.i
local evs = {}
for n, e in ipairs(kept) do
  if index >= after and index - n + 1 <= after then
    break
  end
  evs[#evs + 1] = e
end
return {index, evs, with_priorities(describe(K.lock, K.queue, K.readers, now, ARGV[3]), K.queue, K.waiters), first and 1 or 0}
