-- lib: functions shared by the scripts. Not a script on its own: lua.go puts
-- this file in front of every script, since Redis scripts cannot import.
--
-- The keys of one lock, all with the hash tag {ns/name} (K below):
--   K.lock     hash: tok (SHA-256 of the owner token), fence, sub, own,
--              at (acquired, ms on the Redis clock), ttl (as asked for),
--              p ('1' while the grant is provisional: handed to a waiter
--              whose gateway has not picked it up yet), hs (the ids of its
--              holds, when it was re-entered: see holds.lua); its
--              PEXPIRE is the lease
--   K.fence    the last fencing token handed out
--   K.queue    zset: waiter id -> arrival number (FIFO order)
--   K.alive    zset: waiter id -> ms until which the waiter counts as alive
--   K.waiters  hash: waiter id -> JSON {g: its gateway's channel, t: token
--              hash, ttl, l: how long a grant handed to it waits for its
--              pick-up (ms), s: subject, o: owner label, d: wait deadline
--              ms, m: 's' when it asks for a shared hold}; field '#seq'
--              numbers arrivals
--   K.readers  zset: token hash of a shared holder -> ms on the Redis clock
--              when its lease ends
--   K.delay    string, with --lock-delay: while it exists, a lock nobody
--              holds is not free, for a holder whose lease ended without a
--              release may still be at work; 'g' as a grant sets it (until
--              the delay after its lease), 'x:<ms>' once a shared holder's
--              lease was seen to end unreleased: the delay after that lasts
--              until ms on the Redis clock, whoever releases
--   K.history  list, with --history N: the lock's last N events, newest
--              first, each JSON {e: event, t: ms on the Redis clock, s:
--              subject, o: owner label, f: fencing token}, the numbers as
--              strings (cjson keeps 14 digits of a number, a fencing token
--              has 16); it lives as long as the fencing counter after the
--              last event that began or extended a lease (push_events)
--   K.held     string, with --history: JSON {f, s, o, u: ms when its lease
--              ends} of the exclusive grant, so that the first script to
--              run after its lease ended unreleased records that it expired
--   K.record   string, one per owner token (so the key of the caller's
--              token, among KEYS; absent for scripts without one): 'h'
--              while the grant may be held, until RECORD_MS after its lease
--              (renewals push that on), 'r' for RECORD_MS after its release;
--              a call whose token holds nothing learns why from it
--
-- A lock held shared has tok = '' in K.lock, which no token hash matches
-- (so scripts that know only exclusive holders see it as held by another),
-- and one field 'r:<token hash>' per shared holder: JSON {f: fencing
-- token, s, o, a: acquired at ms, t: ttl asked for, p: 1 while provisional,
-- hs: its hold ids when re-entered (holds.lua)}. K.lock and K.readers then live as long as
-- the longest shared lease, and every script first drops the shared
-- holders whose lease has ended (purge_ended).
--
-- The rule the scripts keep: only a script decides who holds what. A
-- hand-off message says "look again" and nothing else; the waiter's own
-- acquire script then finds, and picks up, what was handed to it.

-- lock_keys is K for the lock scripts' KEYS[1..10] (lock, fence, queue,
-- alive, waiters, readers, delay, history, held, record), with the lock's
-- options, 'delay:history:keep:readers': the lock delay, ms; how many
-- events the history keeps (0: none); how long it outlives the last grant
-- or renewal it records, ms; how many shared holders it may have at once
-- (0: no cap; see shared_full).
local function lock_keys(opts)
  local delay, hist, keep, readers, inline = string.match(opts or '', '^(%d+):(%d+):(%d+):(%d+):?(%d?)$')
  return {lock = KEYS[1], fence = KEYS[2], queue = KEYS[3], alive = KEYS[4], waiters = KEYS[5],
    readers = KEYS[6], delay = KEYS[7], history = KEYS[8], held = KEYS[9], record = KEYS[10],
    delay_ms = tonumber(delay) or 0, hist_n = tonumber(hist) or 0, keep_ms = tonumber(keep) or 0,
    max_readers = tonumber(readers) or 0, index = inline == '1'}
end

-- The namespace's index of held locks (see index.lua, list.lua), which the
-- lock scripts keep themselves on a single Redis (K.index: the options'
-- fifth field), where a script may touch any key; on Cluster the index is
-- on another slot than the lock, and the gateway runs index.lua instead.
-- It is advisory: no script reads it to decide who holds what. The keys
-- are not among KEYS, which on a single Redis nothing requires.
-- CLOCK.now is the Redis time in ms as clock last read it.
local CLOCK = {}

-- index_of returns the index's two keys and the member of the grant whose
-- token hash is tok: K.lock is prefix .. '{ns/name}'.
local function index_of(K, tok)
  local tag = string.match(K.lock, '{([^{}]*)}$')
  local ns, name = string.match(tag, '^([^/]+)/(.+)$')
  local names = string.sub(K.lock, 1, #K.lock - #tag - 2) .. 'index:{' .. ns .. '}'
  return names, names .. ':ends', name .. ' ' .. string.sub(tok, 1, INDEX_HOLD_LEN)
end

-- index_add lists the grant of token hash tok, whose lease ends in left ms
-- from the time clock read.
local function index_add(K, tok, left)
  local names, ends, member = index_of(K, tok)
  local at = CLOCK.now + tonumber(left)
  redis.call('ZADD', names, 0, member)
  redis.call('ZADD', ends, string.format('%d', at), member)
  -- The index outlives its last lease by up to a minute: a stream of
  -- grants moves its expiry about once a minute, not at every grant (an
  -- entry past its lease is skipped, and dropped, by score).
  if redis.call('PTTL', ends) < tonumber(left) then
    redis.call('PEXPIRE', names, left + 60000)
    redis.call('PEXPIRE', ends, left + 60000)
  end
end

-- index_del takes the grant of token hash tok out of the index, and up to
-- 16 entries whose lease has ended with it (index.lua's STALE_PER_CALL).
local function index_del(K, tok, now)
  local names, ends, member = index_of(K, tok)
  redis.call('ZREM', names, member)
  redis.call('ZREM', ends, member)
  local stale = redis.call('ZRANGEBYSCORE', ends, '-inf', now, 'LIMIT', 0, 16)
  if #stale > 0 then
    redis.call('ZREM', names, unpack(stale))
    redis.call('ZREM', ends, unpack(stale))
  end
end

-- shared_full reports whether the lock, held shared, has as many shared
-- holders as it may (K.max_readers): another one waits, or is refused. The
-- cap bounds what a lock costs to keep and to describe, and what one
-- caller can pile onto it.
local function shared_full(K)
  return K.max_readers > 0 and redis.call('ZCARD', K.readers) >= K.max_readers
end

-- push_events adds the encoded events evs, oldest first, to the lock's
-- history: one LPUSH, then the cap. The history lives K.keep_ms after
-- the last event that began or extended a lease (extends), and a new one
-- gets that expiry whatever its first event: an event that ends a lease
-- or drops a waiter comes within one lease of such an event, so it need
-- not move the expiry, which saves a PEXPIRE per release.
local function push_events(K, evs, extends)
  local n = redis.call('LPUSH', K.history, unpack(evs))
  if n > K.hist_n then
    redis.call('LTRIM', K.history, 0, K.hist_n - 1)
  end
  if extends or n == #evs then
    redis.call('PEXPIRE', K.history, K.keep_ms)
  end
end

-- The events that leave the history's expiry where it is (see
-- push_events).
local ENDS = {released = true, expired = true, waiter_dropped = true}

-- event adds an event to the lock's history (when it keeps one: never for
-- a semaphore's S): what happened at ms on the Redis clock, to the grant
-- of subject and owner label with fencing token fence (0 for a waiter).
-- While K.ev is a list (see release_all), the event waits there, to be
-- pushed with the others.
local function event(K, what, ms, sub, own, fence)
  if not K.hist_n or K.hist_n == 0 then
    return
  end
  local e = cjson.encode({e = what, t = string.format('%d', ms), s = sub, o = own,
    f = string.format('%d', tonumber(fence) or 0)})
  if K.ev then
    K.ev[#K.ev + 1] = e
    K.ev_extends = K.ev_extends or not ENDS[what]
  else
    push_events(K, {e}, not ENDS[what])
  end
end

-- holder_of returns the exclusive grant's {fence, subject, owner}.
local function holder_of(K)
  return redis.call('HMGET', K.lock, 'fence', 'sub', 'own')
end

-- hold_note notes the exclusive grant f (see holder_of), whose lease ends
-- at until ms, for check_expired; nothing without a history.
local function hold_note(K, until_ms, f)
  if K.hist_n == 0 then
    return
  end
  redis.call('SET', K.held, cjson.encode({f = f[1], s = f[2], o = f[3], u = string.format('%d', until_ms)}),
    'PX', K.keep_ms)
end

-- check_expired records, once, that the noted exclusive grant's lease
-- ended unreleased: at its end, whichever script runs first after it.
local function check_expired(K, now)
  if K.hist_n == 0 then
    return
  end
  local h = redis.call('GET', K.held)
  if h then
    h = cjson.decode(h)
    if tonumber(h.u) <= now then
      redis.call('DEL', K.held)
      event(K, 'expired', tonumber(h.u), h.s, h.o, h.f)
    end
  end
end

-- RECORD_MS, and the reasons a token holds nothing (UNKNOWN, RELEASED,
-- EXPIRED), are in protocol.lua.

-- why says why the caller's token holds nothing.
local function why(K)
  local r = K.record and redis.call('GET', K.record)
  if r == 'r' then
    return RELEASED
  elseif r == 'h' then
    return EXPIRED -- it was granted and not released: its lease ended
  end
  return UNKNOWN
end

-- released notes that the caller's grant was released.
local function released(K)
  redis.call('SET', K.record, 'r', 'PX', RECORD_MS)
end

-- delayed reports whether a lock nobody holds is kept from new holders by
-- the lock delay.
local function delayed(K)
  return K.delay_ms > 0 and redis.call('EXISTS', K.delay) == 1
end

-- note_grant notes a full grant with left ms of lease, whose record is
-- the key record: the record, and with a lock delay, that the lock stays
-- unavailable until the delay after the lease unless released.
local function note_grant(K, record, left)
  redis.call('SET', record, 'h', 'PX', left + RECORD_MS)
  if K.index then
    index_add(K, string.sub(record, #K.lock + 4), left)
  end
  if K.delay_ms > 0 and redis.call('PTTL', K.delay) < left + K.delay_ms then
    redis.call('SET', K.delay, redis.call('GET', K.delay) or 'g', 'PX', left + K.delay_ms)
  end
end

-- settle notes a grant the caller gets, whose reply is rp (see held_by),
-- and returns rp.
local function settle(K, rp)
  note_grant(K, K.record, rp[3])
  return rp
end

-- keep_idem keeps the idempotency record ik of a grant (see
-- idem_lib.lua), if it has one, until IDEM_GRACE_MS (protocol.lua) after
-- a lease of ms.
local function keep_idem(ik, ms)
  if ik then
    redis.call('PEXPIRE', ik, tonumber(ms) + IDEM_GRACE_MS)
  end
end

-- retry_ms is how long until the lock may be free: the lease, or the lock
-- delay after one.
local function retry_ms(K)
  local ms = redis.call('PTTL', K.lock)
  if K.delay_ms > 0 then
    ms = math.max(ms, redis.call('PTTL', K.delay))
  end
  return ms
end

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

-- grant makes the free lock held by the token hash tok with a lease of
-- lease ms, and returns the new fencing token and when it was acquired (ms),
-- both strings. ttl is the lease asked for: what a pick-up, or a renew
-- without a TTL, gives. A provisional grant is one handed to a waiter that
-- has not picked it up yet. A free lock has no hash to clear: every script
-- writes to K.lock only after finding it held (tok set), or here.
local function grant(K, t, tok, ttl, lease, sub, own, retention, provisional)
  local fence = next_fence(K, t, retention)
  local at = at_ms(t)
  redis.call('HSET', K.lock, 'tok', tok, 'fence', fence,
    'sub', sub, 'own', own, 'at', at, 'ttl', ttl)
  if provisional then
    redis.call('HSET', K.lock, 'p', '1')
  end
  redis.call('PEXPIRE', K.lock, lease)
  hold_note(K, tonumber(at) + tonumber(lease), {fence, sub, own})
  return fence, at
end

-- fresh is the reply of a grant made now (see held_by): it reports the
-- TTL it was given, for PTTL may read a millisecond short, as Redis's
-- clock moves during a script.
local function fresh(fence, ttl, now, at)
  return {1, tonumber(fence), tonumber(ttl), now, tonumber(at), 0}
end

-- pick_up makes a provisional grant a full one: its lease becomes the TTL
-- asked for, from now.
local function pick_up(K, now)
  if redis.call('HDEL', K.lock, 'p') == 1 then
    local ttl = redis.call('HGET', K.lock, 'ttl')
    redis.call('PEXPIRE', K.lock, ttl)
    hold_note(K, now + tonumber(ttl), holder_of(K))
  end
end

-- held_by returns the reply of the exclusive grant the caller held before
-- this script ran (a retried call, or a hand-off picked up now):
-- {1, fencing token, ttl ms, now ms, acquired at ms, 1}; fresh is the reply
-- of a grant made now, with 0 at its end.
local function held_by(K, now)
  local f = redis.call('HMGET', K.lock, 'fence', 'at')
  return {1, tonumber(f[1]), redis.call('PTTL', K.lock), now, tonumber(f[2]), 1}
end

-- keep_shared makes K.lock and K.readers live as long as the longest
-- shared lease, and deletes both when no shared holder is left.
local function keep_shared(K, now)
  local last = redis.call('ZRANGE', K.readers, -1, -1, 'WITHSCORES')[2]
  if not last or tonumber(last) <= now then
    redis.call('DEL', K.lock, K.readers)
    return
  end
  redis.call('PEXPIRE', K.lock, tonumber(last) - now)
  redis.call('PEXPIRE', K.readers, tonumber(last) - now)
end

-- purge_ended drops the shared holders whose lease has ended, records
-- each in the history, and returns whether there were any. With a lock
-- delay, a shared lease that ended unreleased keeps the lock unavailable
-- for the delay from now, even if the others release.
local function purge_ended(K, now)
  local ended = redis.call('ZRANGEBYSCORE', K.readers, '-inf', now, 'WITHSCORES')
  if #ended == 0 then
    return false
  end
  if K.delay_ms > 0 then
    redis.call('SET', K.delay, 'x:' .. string.format('%d', now + K.delay_ms), 'PX',
      math.max(redis.call('PTTL', K.delay), K.delay_ms))
  end
  for i = 1, #ended, 2 do
    local f = 'r:' .. ended[i]
    if K.hist_n > 0 then
      local r = redis.call('HGET', K.lock, f)
      if r then
        r = cjson.decode(r)
        event(K, 'expired', tonumber(ended[i + 1]), r.s, r.o, r.f)
      end
    end
    redis.call('HDEL', K.lock, f)
  end
  redis.call('ZREMRANGEBYSCORE', K.readers, '-inf', now)
  keep_shared(K, now)
  return true
end

-- current returns the lock's holder, as the field tok: nil when the lock
-- is free, '' when it is held shared, else the exclusive holder's token
-- hash. Every lock script that writes starts with it (but a release by
-- the exclusive holder, which needs neither of its checks). Unless the
-- lock is held exclusively, it first records an exclusive lease that ended
-- unreleased (check_expired) and drops the shared holds that ended
-- (purge_ended): a live exclusive grant has neither, for the held note is
-- its own, and no shared hold lives beside it (K.readers lives and dies
-- with K.lock).
local function current(K, now)
  local tok = redis.call('HGET', K.lock, 'tok')
  if tok and tok ~= '' then
    return tok
  end
  check_expired(K, now)
  if tok == '' and purge_ended(K, now) then
    tok = redis.call('HGET', K.lock, 'tok')
  end
  return tok
end

-- add_reader gives token hash tok a shared hold of the lock (free, or
-- held shared) with a lease of lease ms, and returns its fencing token and
-- when it was acquired (ms), as grant does.
local function add_reader(K, t, now, tok, ttl, lease, sub, own, retention, provisional)
  local fence = next_fence(K, t, retention)
  local r = {f = fence, s = sub, o = own, t = ttl, a = at_ms(t)}
  if provisional then
    r.p = 1
  end
  redis.call('HSET', K.lock, 'tok', '', 'r:' .. tok, cjson.encode(r))
  redis.call('ZADD', K.readers, string.format('%d', now + tonumber(lease)), tok)
  keep_shared(K, now)
  return fence, r.a
end

-- reader returns the shared hold of token hash tok, decoded, or nil.
local function reader(K, tok)
  local r = redis.call('HGET', K.lock, 'r:' .. tok)
  return r and cjson.decode(r)
end

-- drop_reader ends the shared hold of token hash tok.
local function drop_reader(K, now, tok)
  redis.call('HDEL', K.lock, 'r:' .. tok)
  redis.call('ZREM', K.readers, tok)
  keep_shared(K, now)
end

-- reader_reply is held_by for the shared hold r of token hash tok; a
-- provisional one is picked up: its lease becomes the TTL asked for.
local function reader_reply(K, now, tok, r, handed)
  if r.p then
    r.p = nil
    redis.call('HSET', K.lock, 'r:' .. tok, cjson.encode(r))
    redis.call('ZADD', K.readers, string.format('%d', now + tonumber(r.t)), tok)
    keep_shared(K, now)
  end
  local ttl = tonumber(r.t)
  if handed == 1 then
    ttl = tonumber(redis.call('ZSCORE', K.readers, tok)) - now
  end
  return {1, tonumber(r.f), ttl, now, tonumber(r.a), handed}
end

local function dequeue(K, id)
  redis.call('ZREM', K.queue, id)
  redis.call('ZREM', K.alive, id)
  redis.call('HDEL', K.waiters, id)
end

-- enqueue puts waiter me in the queue, unless it is there already, and
-- returns its arrival number. arrival is its number from an earlier call
-- ('0' for a new arrival), so that a waiter that rejoins keeps its place;
-- req is what a hand-off needs to grant to it (see K.waiters above).
local function enqueue(K, now, me, arrival, wait, lease, req)
  local seq = tonumber(arrival)
  if seq == 0 then
    seq = redis.call('HINCRBY', K.waiters, '#seq', 1)
  end
  -- NX: a waiter already queued keeps its place (and a number drawn for
  -- it in vain leaves a gap, which FIFO order does not mind).
  if redis.call('ZADD', K.queue, 'NX', seq, me) == 0 then
    return tonumber(redis.call('ZSCORE', K.queue, me))
  end
  local deadline = now + tonumber(wait)
  redis.call('ZADD', K.alive,
    string.format('%d', math.min(deadline, now + tonumber(lease))), me)
  req.d = string.format('%d', deadline)
  req.l = lease
  redis.call('HSET', K.waiters, me, cjson.encode(req))
  -- The queue's keys outlive their last waiter by half a minute to a
  -- minute, then go: they are given a minute past this waiter's deadline
  -- when less than half a minute past it is left, so that a stream of
  -- waiters moves their expiry about every half minute, not at every
  -- arrival. The three are always given the same expiry, so one PTTL tells.
  local keep = tonumber(wait) + 60000
  if redis.call('PTTL', K.queue) < keep - 30000 then
    for _, k in ipairs({K.queue, K.alive, K.waiters}) do
      redis.call('PEXPIRE', k, keep)
    end
  end
  return seq
end

-- keep_alive moves the alive time of each waiter id in ids[first..] still
-- queued to lease ms from now, but never past its deadline.
local function keep_alive(K, now, lease, ids, first)
  for i = first, #ids do
    local w = redis.call('HGET', K.waiters, ids[i])
    if w then
      local until_ms = math.min(tonumber(cjson.decode(w).d), now + tonumber(lease))
      redis.call('ZADD', K.alive, 'XX', string.format('%d', until_ms), ids[i])
    end
  end
end

-- still_queued returns, for each waiter id in ids[first..], 1 while it is
-- queued and 0 when it is not (handed what it waited for, or dropped).
local function still_queued(K, ids, first)
  local queued = {}
  for i = first, #ids do
    queued[i - first + 1] = redis.call('HEXISTS', K.waiters, ids[i])
  end
  return queued
end

-- first_alive returns the first waiter still alive and its request, and
-- drops the dead ones met on the way (past their deadline or heartbeat).
-- Returns nil when nobody alive waits.
local function first_alive(K, now)
  while true do
    local id = redis.call('ZRANGE', K.queue, 0, 0)[1]
    if not id then
      return nil
    end
    local alive = tonumber(redis.call('ZSCORE', K.alive, id))
    local w = redis.call('HGET', K.waiters, id)
    if w and alive and alive > now then
      return id, cjson.decode(w)
    end
    dequeue(K, id)
    if w then
      w = cjson.decode(w)
      event(K, 'waiter_dropped', now, w.s, w.o, 0)
    end
  end
end

-- wake tells waiter id's gateway to look again, with one message on the
-- gateway's own channel: the id and nothing else. Returns false when
-- check_heard is '1' (exact on a single Redis) and nobody listens there: its
-- gateway is gone.
local function wake(e, id, check_heard)
  return redis.call('PUBLISH', e.g, id) > 0 or check_heard ~= '1' or e.k == 1 -- a ticket: nobody need listen
end

-- handoff gives the lock, when it is free or held shared, to the waiters
-- at the head of the queue: the first one still alive and, while the lock
-- is held shared, each shared one after it, up to the first that asks for
-- an exclusive hold (which waits, and blocks everyone behind it: writers
-- do not starve). holder is the lock's holder as current returned it, or
-- as the caller has changed it since. The caller (me) gets a full grant,
-- and so does an exclusive waiter on the caller's own gateway (here: the
-- channel of the gateway that runs this script, which learns of the grant
-- from the script's reply); its record and the lock delay are noted here,
-- as its own script would. Anyone else gets a provisional grant, with a
-- lease of at most its pick-up time, and its gateway is woken: a grant
-- nobody picks up, because the gateway died, froze or was cut off, ends
-- within that time and the queue moves on. A waiter whose gateway is known
-- to be gone is dropped. Returns {mine = me's reply (see fresh), if me got
-- the lock; near = the id of the waiter of here that got it in full, if
-- any, and near_reply its reply; holder = the lock's holder after}.
local function handoff(K, t, now, holder, retention, check_heard, me, here)
  local h = {}
  while true do
    if holder and holder ~= '' then
      break -- held exclusively
    end
    if not holder and delayed(K) then
      break
    end
    local id, e = first_alive(K, now)
    if not id or (holder and e.m ~= 's') or (holder == '' and shared_full(K)) then
      break -- the shared ones wait for a holder to leave
    end
    dequeue(K, id)
    local full = id == me or (here and e.g == here and e.m ~= 's' and e.k ~= 1) -- a ticket picks up by polling
    local lease = e.ttl
    if e.k == 1 then
      -- A ticket's grant waits its whole pick-up time, whatever TTL it
      -- asked for: the poll that picks it up gives it that TTL then.
      lease = e.l
    elseif not full then
      lease = math.min(tonumber(e.ttl), tonumber(e.l))
    end
    local fence, at
    if e.m == 's' then
      fence, at = add_reader(K, t, now, e.t, e.ttl, lease, e.s, e.o, retention, not full)
      holder = ''
    else
      fence, at = grant(K, t, e.t, e.ttl, lease, e.s, e.o, retention, not full)
      holder = e.t
    end
    event(K, id == me and 'acquired' or 'handed_over', now, e.s, e.o, fence)
    if id == me then
      h.mine = fresh(fence, e.ttl, now, at)
    elseif full then
      h.near, h.near_reply = id, fresh(fence, e.ttl, now, at)
      -- The record's key shares the lock's hash tag, so it is on this
      -- script's slot; it is not among KEYS, as the caller did not know
      -- whose grant this would be.
      note_grant(K, K.lock .. ':t:' .. e.t, tonumber(e.ttl))
    elseif not wake(e, id, check_heard) then -- its gateway is gone: the grant would sit unused
      if e.m == 's' then
        drop_reader(K, now, e.t)
        holder = redis.call('HGET', K.lock, 'tok')
      else
        redis.call('DEL', K.lock)
        if K.hist_n > 0 then
          redis.call('DEL', K.held)
        end
        holder = nil
      end
      event(K, 'waiter_dropped', now, e.s, e.o, 0)
    end
  end
  h.holder = holder
  return h
end

-- release_all ends the caller's hold (the exclusive grant, or its shared
-- hold r), notes it, and hands the lock on (see handoff for here). f is
-- the exclusive grant's HMGET of at, sub, own and fence, if the caller has
-- read them already. Returns how long the hold was held, ms, and the near
-- id and reply handoff returns. When the lock is free then, the lock delay
-- ends, but for what remains of one after a shared holder's lease that
-- ended unreleased ('x:<ms>').
local function release_all(K, t, now, tok, r, f, retention, check_heard, here)
  local at, holder
  -- The release and the hand-off that follows it (a grant, waiters
  -- dropped) go into the history together, with one LPUSH.
  K.ev = {}
  if r then
    at = r.a
    event(K, 'released', now, r.s, r.o, r.f)
    drop_reader(K, now, tok)
    holder = redis.call('HGET', K.lock, 'tok')
  else
    f = f or redis.call('HMGET', K.lock, 'at', 'sub', 'own', 'fence')
    at = f[1]
    event(K, 'released', now, f[2], f[3], f[4])
    if K.hist_n > 0 then
      redis.call('DEL', K.lock, K.held)
    else
      redis.call('DEL', K.lock)
    end
  end
  released(K)
  if K.index then
    index_del(K, tok, now)
  end
  if K.delay_ms > 0 and not holder then
    local d = redis.call('GET', K.delay)
    local until_ms = d and tonumber(string.match(d, '^x:(%d+)$'))
    if until_ms and until_ms > now then
      redis.call('SET', K.delay, d, 'PX', until_ms - now)
    else
      redis.call('DEL', K.delay)
    end
  end
  local h = handoff(K, t, now, holder, retention, check_heard, nil, here)
  local ev = K.ev
  K.ev = nil
  if #ev > 0 then
    push_events(K, ev, K.ev_extends)
  end
  return now - (tonumber(at) or now), h.near, h.near_reply
end
