-- lib_queue: the queue of waiters (K.queue, K.alive, K.waiters, see
-- lib_keys.lua): joining it, leaving it, keeping alive, finding the first
-- waiter alive, and waking a waiter's gateway. A library, not a script on
-- its own.

-- dequeue takes waiter id out of the queue.
local function dequeue(K, id)
  redis.call('ZREM', K.queue, id)
  redis.call('ZREM', K.alive, id)
  redis.call('HDEL', K.waiters, id)
end

-- enqueue puts waiter me in the queue, unless it is there already, and
-- returns its arrival number (its score in K.queue), and whether it joined
-- now (false: it was queued already, and nothing changed). arrival is its number
-- from an earlier call ('0' for a new arrival), so that a waiter that
-- rejoins keeps its place; req is what a hand-off needs to grant to it
-- (see K.waiters in lib_keys.lua); head, only for a waiter with a
-- priority (nil for none), is its head start, ms: its priority times the
-- gateway's priority aging.
--
-- A new arrival's number is the Redis clock in ms (now), made strictly
-- increasing per lock by '#seq' (the last one drawn, written with the
-- waiter: a clock that steps back, a failover to a replica whose clock is
-- behind, or more than one arrival in a millisecond keep FIFO order), less
-- the head start. So a waiter of priority p ranks as one of priority 0
-- that came p agings earlier: every aging of waiting raises it one level
-- against those who came later, and the order is a static score that no
-- script need revisit. An old script's HINCRBY of '#seq' carries on from
-- the clock's number, and the small numbers it drew rank first, as the
-- older arrivals they are.
local function enqueue(K, now, me, arrival, wait, lease, req, head)
  -- drawn: a new arrival's number, as text; score: its place, as text.
  local seq, drawn, score = tonumber(arrival), nil, arrival
  if seq == 0 then
    seq = math.max(now, (tonumber(redis.call('HGET', K.waiters, '#seq')) or 0) + 1)
    drawn = string.format('%d', seq)
    score = drawn
    if head then
      seq = seq - tonumber(head)
      score = string.format('%d', seq)
    end
  end
  -- NX: a waiter already queued keeps its place (and a number drawn for
  -- it in vain is not kept).
  if redis.call('ZADD', K.queue, 'NX', score, me) == 0 then
    return tonumber(redis.call('ZSCORE', K.queue, me)), false
  end
  local deadline = now + tonumber(wait)
  redis.call('ZADD', K.alive,
    string.format('%d', math.min(deadline, now + tonumber(lease))), me)
  req.d = string.format('%d', deadline)
  req.l = lease
  if drawn then
    redis.call('HSET', K.waiters, me, cjson.encode(req), '#seq', drawn)
  else
    redis.call('HSET', K.waiters, me, cjson.encode(req))
  end
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
  return seq, true
end

-- IDS_PER_CALL is how many waiter ids keep_alive and still_queued put in
-- one command. A heartbeat names every waiter its gateway has on the lock,
-- hundreds on a busy one: a command or two per waiter made it the longest
-- script such a lock runs, with most of its time in redis.call itself.
-- Chunks, not one command for all, since unpack fails past about 8000
-- values, and a gateway may have more waiters than that.
local IDS_PER_CALL = 500

-- keep_alive moves the alive time of each waiter id in ids[first..] still
-- queued to lease ms from now, but never past its deadline.
local function keep_alive(K, now, lease, ids, first)
  local lease_end = now + tonumber(lease)
  for from = first, #ids, IDS_PER_CALL do
    local to = math.min(from + IDS_PER_CALL - 1, #ids)
    local ws = redis.call('HMGET', K.waiters, unpack(ids, from, to))
    local alive = {}
    for i = from, to do
      local w = ws[i - from + 1]
      if w then
        local until_ms = math.min(tonumber(cjson.decode(w).d), lease_end)
        alive[#alive + 1] = string.format('%d', until_ms)
        alive[#alive + 1] = ids[i]
      end
    end
    if #alive > 0 then
      redis.call('ZADD', K.alive, 'XX', unpack(alive))
    end
  end
end

-- still_queued returns, for each waiter id in ids[first..], 1 while it is
-- queued and 0 when it is not (handed what it waited for, or dropped).
local function still_queued(K, ids, first)
  local queued = {}
  for from = first, #ids, IDS_PER_CALL do
    local to = math.min(from + IDS_PER_CALL - 1, #ids)
    local ws = redis.call('HMGET', K.waiters, unpack(ids, from, to))
    for i = from, to do
      queued[i - first + 1] = ws[i - from + 1] and 1 or 0
    end
  end
  return queued
end

-- first_alive returns the first waiter still alive and its request, and
-- drops the dead ones met on the way (past their deadline or heartbeat).
-- Returns nil when nobody alive waits. now nil: it reads the clock (see
-- clock) only when someone waits, for a release that needs none else.
local function first_alive(K, now)
  -- The usual lock has no queue: an EXISTS (one argument, a number back)
  -- says so for less than the ZRANGE (three, and a list), and a lock
  -- with waiters pays the command more.
  if redis.call('EXISTS', K.queue) == 0 then
    return nil
  end
  while true do
    local id = redis.call('ZRANGE', K.queue, '0', '0')[1]
    if not id then
      return nil
    end
    now = now or clock()
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
