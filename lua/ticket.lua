-- ticket: a waiter that outlives the call that queued it. A ticket is an
-- entry of the lock's queue like any waiter's (see lib_keys.lua), whose waiter
-- id is the ticket id and whose token hash is that of the ticket token,
-- which becomes the owner token of the grant the ticket is handed. Its
-- entry has k = 1: its alive time is moved on by its caller's polls, not
-- by a gateway's heartbeats, and a hand-off to it is never dropped for
-- want of a listener on its channel (nobody need be polling when the lock
-- reaches it) nor given in full to a releasing gateway (the grant stays
-- provisional until a poll picks it up, within the ticket liveness).
--
-- KEYS[1..2]  the lock, and the record of the ticket token
--             (see lib_keys.lua)
-- ARGV[1]     'new' (queue a ticket), 'poll' (look at it, and pick up a
--             grant handed to it) or 'cancel' (leave the queue, and release
--             a grant it was handed)
-- ARGV[2]     the ticket id
-- ARGV[3]     SHA-256 of the ticket token
-- ARGV[4]     the channel of the gateway that runs this, for the hand-off
--             message to a long-poll
-- ARGV[5]     the ticket liveness, ms: a ticket counts as alive for this
--             long after each poll, and a grant handed to it waits this long
--             to be picked up
-- ARGV[6]     how long the fencing counter outlives its last use, ms
-- ARGV[7]     '1' to drop a waiter (not a ticket) whose gateway does not
--             hear the hand-off (see lib_queue.lua wake)
-- ARGV[8]     the lock's options (see lock_keys)
-- ARGV[9..14] for 'new' only: how long the ticket waits, ms; the lease TTL,
--             ms; the subject; the owner label; 's' for a shared hold, 'x'
--             for an exclusive one; the grant's value ('' for none)
-- ARGV[15]    for 'new' only, and only for a grant with a hard cap: its
--             max hold, ms (see acquire.lua); '' for none when ARGV[16..17]
--             follow
-- ARGV[16..17] for 'new' only, and only for a ticket with a priority (1 to
--             9): the priority, and its head start, ms (see acquire.lua)
--
-- Returns  {1, fencing_token, ttl_ms, now_ms, acquired_at_ms, handed, shared[, cap_ms]}
--              granted ('new', 'poll'): at once, or handed over and picked
--              up now; a poll after the pick-up answers the same (handed 1,
--              what remains of the lease), so a lost answer can be asked for
--              again; shared is 1 for a shared hold, else 0; cap_ms, for a
--              grant with a hard cap only, how long until it ends the grant
--              (as renew.lua's): a poll does not know the ticket's request
--          {0, retry_ms, now_ms, rank, arrival}
--              queued ('new', 'poll') at 0-based rank; 'cancel': left
--          {2}   'cancel': the ticket's grant was released (and handed on)
--          {-1}  no such ticket with this token: it was never made, it
--                left, it was not polled within the liveness, its wait ran
--                out, or its grant ended; or the token is not its token
--
-- One script decides, as for every waiter: a ticket is granted only by a
-- hand-off in a script, and a poll that finds the ticket dead (past its
-- alive time) removes it, whatever a later hand-off would have done.

local K = lock_keys(ARGV[8])
local op, id, tok, liveness = ARGV[1], ARGV[2], ARGV[3], ARGV[5]

-- granted settles the ticket's grant, whose reply is rp (see held_by), and
-- returns it with shared at its end: 1 for a shared hold, else 0; and
-- then, for a grant with a hard cap, how long until it (see Returns).
local function granted(rp, is_shared)
  rp[7] = is_shared and 1 or 0
  local cap
  if is_shared then
    cap = reader(K, tok).cap
  else
    cap = redis.call('HGET', K.lock, 'cap')
  end
  if cap then
    rp[8] = math.max(tonumber(cap) - rp[4], 0)
  end
  return settle(K, rp)
end

local now, t = clock()
local holder = current(K, now)

local w = redis.call('HGET', K.waiters, id)
local e = w and cjson.decode(w)
if e and e.t ~= tok then
  return {-1} -- another's ticket: do not say whose, nor touch it
end

-- A grant handed to the ticket (or picked up by an earlier poll).
if op ~= TICKET_NEW then
  local r = holder == '' and reader(K, tok)
  if holder == tok or r then
    if e then
      dequeue(K, id)
    end
    if op == TICKET_CANCEL then
      release_all(K, t, now, tok, r, nil, ARGV[6], ARGV[7])
      return {2}
    end
    if r then
      return granted(reader_reply(K, now, tok, r, 1), true)
    end
    pick_up(K, now)
    return granted(held_by(K, now), false)
  end
end

local shared
if op == TICKET_NEW then
  shared = ARGV[13] == MODE_SHARED
  local req = {g = ARGV[4], t = tok, ttl = ARGV[10], s = ARGV[11], o = ARGV[12], k = 1}
  if shared then
    req.m = 's'
  end
  if ARGV[14] and ARGV[14] ~= '' then
    req.v = ARGV[14]
  end
  if ARGV[15] and ARGV[15] ~= '' then
    req.cap = ARGV[15]
  end
  req.pr = ARGV[16]
  enqueue(K, now, id, '0', ARGV[9], liveness, req, ARGV[17])
else
  if not e then
    return {-1}
  end
  local alive = tonumber(redis.call('ZSCORE', K.alive, id))
  if not alive or alive <= now or op == TICKET_CANCEL then
    -- Dead (not polled in time, or its wait ran out) or leaving: either
    -- way out of the queue, and those behind it may move up.
    dequeue(K, id)
    if op ~= TICKET_CANCEL then
      event(K, 'waiter_dropped', now, e.s, e.o, 0)
    end
    handoff(K, t, now, holder, ARGV[6], ARGV[7], nil)
    if op == TICKET_CANCEL and alive and alive > now then
      return {0, retry_ms(K), now, -1, 0}
    end
    return {-1}
  end
  shared = e.m == 's'
  e.g = ARGV[4]
  redis.call('HSET', K.waiters, id, cjson.encode(e))
  redis.call('ZADD', K.alive, 'XX',
    string.format('%d', math.min(tonumber(e.d), now + tonumber(liveness))), id)
end

local h = handoff(K, t, now, holder, ARGV[6], ARGV[7], id)
if h.mine then
  return granted(h.mine, shared)
end
local seq = tonumber(redis.call('ZSCORE', K.queue, id)) or 0
return {0, retry_ms(K), now, redis.call('ZRANK', K.queue, id) or -1, seq}
