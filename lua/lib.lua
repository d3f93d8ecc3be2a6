-- lib: functions shared by the scripts. Not a script on its own: lua.go puts
-- this file in front of every script, since Redis scripts cannot import.
--
-- The keys of one lock, all with the hash tag {ns/name} (K below):
--   K.lock     hash: tok (SHA-256 of the owner token), fence, sub, own,
--              at (acquired, ms on the Redis clock), ttl (as asked for),
--              p ('1' while the grant is provisional: handed to a waiter
--              whose gateway has not picked it up yet), holds (how many
--              times the holder holds it, when more than once); its
--              PEXPIRE is the lease
--   K.fence    the last fencing token handed out
--   K.queue    zset: waiter id -> arrival number (FIFO order)
--   K.alive    zset: waiter id -> ms until which the waiter counts as alive
--   K.waiters  hash: waiter id -> JSON {g: its gateway's channel, t: token
--              hash, ttl, l: how long a grant handed to it waits for its
--              pick-up (ms), s: subject, o: owner label, d: wait deadline
--              ms}; field '#seq' numbers arrivals
--
-- The rule the scripts keep: only a script decides who holds what. A
-- hand-off message says "look again" and nothing else; the waiter's own
-- acquire script then finds, and picks up, what was handed to it.

local function keys_of(lock, fence, queue, alive, waiters)
  return {lock = lock, fence = fence, queue = queue, alive = alive, waiters = waiters}
end

-- clock returns the Redis time in ms, and as TIME's {seconds, microseconds}.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
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
local function next_fence(K, t, retention)
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', K.fence) or '0') or 0
  local fence = string.format('%d', math.max(last + 1, us))
  redis.call('SET', K.fence, fence, 'PX', retention)
  return fence
end

-- grant makes the lock held by the token hash tok with a lease of lease ms,
-- and returns the new fencing token (a string). ttl is the lease asked for:
-- what a pick-up, or a renew without a TTL, gives. A provisional grant is
-- one handed to a waiter that has not picked it up yet.
local function grant(K, t, tok, ttl, lease, sub, own, retention, provisional)
  local fence = next_fence(K, t, retention)
  local at = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
  redis.call('DEL', K.lock)
  redis.call('HSET', K.lock, 'tok', tok, 'fence', fence,
    'sub', sub, 'own', own, 'at', at, 'ttl', ttl)
  if provisional then
    redis.call('HSET', K.lock, 'p', '1')
  end
  redis.call('PEXPIRE', K.lock, lease)
  return fence
end

-- pick_up makes a provisional grant a full one: its lease becomes the TTL
-- asked for, from now.
local function pick_up(K)
  if redis.call('HDEL', K.lock, 'p') == 1 then
    redis.call('PEXPIRE', K.lock, redis.call('HGET', K.lock, 'ttl'))
  end
end

-- held_by returns the reply of a grant held by the caller:
-- {1, fencing token, ttl ms, now ms, acquired at ms, handed}, where handed
-- is 1 when the grant was made before this script ran (handed over, and
-- picked up now), else 0. A grant made now reports the TTL it was given:
-- PTTL may read a millisecond short, as Redis's clock moves during a
-- script.
local function held_by(K, now, handed)
  local f = redis.call('HMGET', K.lock, 'fence', 'at', 'ttl')
  local ttl = redis.call('PTTL', K.lock)
  if handed == 0 then
    ttl = tonumber(f[3])
  end
  return {1, tonumber(f[1]), ttl, now, tonumber(f[2]), handed}
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
  local seq = tonumber(redis.call('ZSCORE', K.queue, me))
  if seq then
    return seq
  end
  seq = tonumber(arrival)
  if seq == 0 then
    seq = redis.call('HINCRBY', K.waiters, '#seq', 1)
  end
  local deadline = now + tonumber(wait)
  redis.call('ZADD', K.queue, seq, me)
  redis.call('ZADD', K.alive,
    string.format('%d', math.min(deadline, now + tonumber(lease))), me)
  req.d = string.format('%d', deadline)
  req.l = lease
  redis.call('HSET', K.waiters, me, cjson.encode(req))
  -- The queue's keys outlive their last waiter by a minute, then go.
  local keep = tonumber(wait) + 60000
  for _, k in ipairs({K.queue, K.alive, K.waiters}) do
    if redis.call('PTTL', k) < keep then
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
  end
end

-- wake tells waiter id's gateway to look again, with one message on the
-- gateway's own channel: the id and nothing else. Returns false when
-- check_heard is '1' (exact on a single Redis) and nobody listens there: its
-- gateway is gone.
local function wake(e, id, check_heard)
  return redis.call('PUBLISH', e.g, id) > 0 or check_heard ~= '1'
end

-- handoff gives the free lock to the first waiter still alive. When that
-- waiter is the caller (me), or waits on the caller's own gateway (here: the
-- channel of the gateway that runs this script, which learns of the grant
-- from the script's reply), the grant is a full one, and the second value
-- returned is true. Otherwise it is provisional, with a lease of at most
-- the waiter's pick-up time, and the waiter's gateway is woken: a grant
-- nobody picks up, because the gateway died, froze or was cut off, ends
-- within that time and the queue moves on. A waiter whose gateway is known
-- to be gone is dropped. Returns the waiter's id, or nil when nobody alive
-- waits.
local function handoff(K, t, now, retention, check_heard, me, here)
  while true do
    local id, e = first_alive(K, now)
    if not id then
      return nil
    end
    dequeue(K, id)
    if id == me or (here and e.g == here) then
      grant(K, t, e.t, e.ttl, e.ttl, e.s, e.o, retention, false)
      return id, true
    end
    grant(K, t, e.t, e.ttl, math.min(tonumber(e.ttl), tonumber(e.l)), e.s, e.o, retention, true)
    if wake(e, id, check_heard) then
      return id
    end
    redis.call('DEL', K.lock) -- its gateway is gone: the grant would sit unused
  end
end
