-- protocol: the numbers the scripts and the engine (locks/redisbackend/protocol.go) must
-- agree on, put in front of every script, and now_ms, the one reading of
-- Redis's clock in ms that every script shares (the lock scripts' clock,
-- lib_fence.lua, keeps µs too). TestProtocolAgrees (locks) reads this file
-- and fails when a value here and its Go twin differ.
--
-- KEYS[1]  none: this file only names values
-- Returns  nothing: not a script on its own
--
-- A reply is a list whose first element is its code:
local GRANTED = 1          -- {GRANTED, fencing_token, ttl_ms, now_ms, acquired_at_ms, handed, ...}
local NOT_GRANTED = 0      -- {NOT_GRANTED, retry_ms, now_ms, rank, arrival}; {NOT_GRANTED, why}
local GAVE_BACK = 2        -- a leave or a ticket's cancel released the caller's grant
local NOT_FOUND = -1       -- no such ticket; a semaphore in use with another limit
local OTHER_MODE = -2      -- a re-entry of a hold in the other mode
local FENCED_OFF = -3      -- the call was fenced off by a cleanup before it ran (see once.lua)
local SHARED_FULL = -4     -- {SHARED_FULL, retry_ms}: the lock has its most shared holders
local SESSION_ENDED = -5   -- no live session of the token (lib_session.lua)
local SESSION_NOT_YOURS = -6 -- the session is another subject's
local SESSION_FULL = -7    -- the session holds its most grants
local FENCED = {FENCED_OFF}
-- The last element of a release's reply that repeats an earlier one.
local REPEATED = 0

-- Why a token holds nothing, in {NOT_GRANTED, why}.
local UNKNOWN, RELEASED, EXPIRED, BROKEN = 0, 1, 2, 3

-- What idem_begin.lua found about an idempotency key, its reply's first
-- element: nothing (the attempt begins), a live grant, an attempt still
-- running, a record of another request, a grant that ended.
local IDEM_BEGUN, IDEM_LIVE, IDEM_RUNNING, IDEM_OTHER_REQUEST, IDEM_ENDED = 0, 1, 2, 3, 4

-- The words the engine sends, and inspect.lua answers: a hold's mode; an
-- operation of ticket.lua. (A waiter's request keeps its mode as m = 's'
-- in K.waiters: that is the layout, see lib_keys.lua.)
local MODE_SHARED, MODE_EXCLUSIVE = 's', 'x'
-- inspect.lua's first word for a lock that nobody holds and that a
-- released grant's min hold keeps from others: {MODE_RESTING, until ms}.
local MODE_RESTING = '-'
local TICKET_NEW, TICKET_POLL, TICKET_CANCEL = 'new', 'poll', 'cancel'

-- The first element of the list a script appends to its reply on Cluster
-- when the namespace's index is due a write (lib_index.lua index_trailer).
local INDEX_DUE = 'index'

-- The first word of a watch's hint on a gateway's channel (lib_history.lua
-- push_events): 'watch <lock key> <index>', which no waiter id matches.
local WATCH_HINT = 'watch'

-- What a library needs done once a script's main part has run, before
-- once.lua records its reply: functions, called in order with the reply
-- (lib_fence.lua writes the name records the call changed, lib_index.lua
-- appends the index's entries due on Cluster).
local AFTER_MAIN = {}

-- The id of the call that runs (once.lua sets it before the script's main
-- part runs): a keyed script keys its writes by it (see lua.go Keyed).
local CALL_ID

-- UNCHANGED is set by a script whose reply is a refusal that changed
-- nothing (see unchanged); once.lua clears it before each call.
local UNCHANGED

-- unchanged returns reply, a refusal that changed nothing, and tells
-- once.lua to keep no record of it: a call with no effect has none to
-- repeat, and the record's SET cost a refused call about 12 000 Redis
-- instructions. A copy of the call delivered later runs again, and its
-- answer is as true as this one was when given.
local function unchanged(reply)
  UNCHANGED = true
  return reply
end

-- How long a grant's record outlives its lease, or its release, ms: a
-- repeated release within it succeeds again, and a renew or release that
-- fails says why (released, expired). locks.RecordTTL.
local RECORD_MS = 60000

-- How long an idempotency record outlives its grant's lease, ms.
-- locks.IdempotencyGrace.
local IDEM_GRACE_MS = 60000

-- now_ms returns the Redis time in ms. TIME's text turns into numbers by
-- Lua's arithmetic, not its library (tonumber, math.floor): the same
-- conversion without a call, which costs Redis about 1 000 instructions
-- each (see lib_fence.lua CLOCK).
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
end
