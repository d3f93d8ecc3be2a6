-- semlib: functions the semaphore scripts share, put after the lock
-- libraries (lib_*.lua) in front of each of them.
--
-- The keys of one semaphore, all with the hash tag {ns/name}, under a
-- prefix of their own ('sem:') so that a semaphore and a lock of the same
-- name never meet (S below; the queue keys are as for a lock, see lib_keys.lua):
--   S.holders  hash: SHA-256 of an owner token -> JSON {f: fencing token,
--              s: subject, o: owner label, a: acquired at ms, t: ttl asked
--              for, p: 1 while provisional, cap: its hard cap, as K.lock's
--              (lib_keys.lua; absent for none), sm: its session's member,
--              for a permit that session_sem_acquire made (lib_keys.lua
--              'sm')}; field '#limit' is the limit
--              in force while anyone holds or waits, field '#i' holds the
--              semaphore's index (see below)
--   S.leases   zset: token hash -> ms on the Redis clock when its lease ends
--   S.fence, S.queue, S.alive, S.waiters   as K.fence ... K.waiters
--   S.record   the caller's record, as K.record (absent for scripts
--              without a caller's token); semaphores have no lock delay
--
-- A lease that ends frees its permit at once: every script first drops
-- the holders whose lease ended (purge), so no script ever counts one.
--
-- The semaphore's index moves on with every change of the holders and
-- waiters that sem_inspect.lua describes (a permit taken, picked up,
-- renewed, released or expired, a waiter that joins or leaves, the limit
-- changed), and never repeats or goes back. It lives in S.holders, the
-- semaphore's own record, as field '#i': the index when a script last
-- wrote it plus how many leases were live then. Every lease that stops
-- being live since (released, or ended) is a change: the index is '#i'
-- less the leases live now (sem_index). So a release, which takes its
-- lease away, and a lease that ends with no script run, write nothing for
-- it, and sem_inspect.lua, which writes nothing, answers the same index
-- as the next script finds. Any other change (a permit added, a lease
-- renewed, a waiter, the limit) writes '#i', in a write the script makes
-- anyway where there is one (add_holder, the limit's), else once before
-- it returns (sem_done). A record that has none (new, or
-- lost) starts the index from the Redis clock in microseconds, as a lock's
-- history does (see locks.Watcher): above every index of the record
-- before, as long as its changes came fewer than one per microsecond. So
-- that a watcher of an idle semaphore does not see it lost, S.holders and
-- S.leases live on for the fence retention (S.keep) after the last lease
-- ends, together (keep_keys).

local function sem_keys(holders, leases, fence, queue, alive, waiters, record)
  return {holders = holders, leases = leases, fence = fence, queue = queue,
    alive = alive, waiters = waiters, record = record, delay_ms = 0}
end

-- sem_keys_of is sem_keys of a call that passes the holders key and the
-- caller's record (nil for none), the other keys named from the first, as
-- a lock's are (see lib_keys.lua lock_keys_at: each key Redis takes as an
-- argument costs it about 3 800 instructions, a concatenation about 900).
-- They share its hash tag, so they are on its slot on Cluster too.
local function sem_keys_of(holders, record)
  return sem_keys(holders, holders .. ':leases', holders .. ':fence', holders .. ':queue',
    holders .. ':alive', holders .. ':waiters', record)
end

-- purge drops the holders whose lease has ended (the index counted them
-- out already: see above).
local function purge(S, now)
  local ended = redis.call('ZRANGEBYSCORE', S.leases, '-inf', now)
  for _, tok in ipairs(ended) do
    redis.call('HDEL', S.holders, tok)
  end
  if #ended > 0 then
    redis.call('ZREMRANGEBYSCORE', S.leases, '-inf', now)
  end
end

-- sem_index is the index of a record whose '#i' is i (text or a number;
-- false or nil for none) while live leases are live: 0 when it has none.
local function sem_index(i, live)
  i = tonumber(i)
  if not i then
    return 0
  end
  return i - live
end

-- found notes the record's '#i', i, as read, and t, the clock, for bump.
local function found(S, i, t)
  S.i, S.t = tonumber(i), t
end

-- bump moves the index on by one change (from the clock when the record
-- has none), live leases being live before it, and after it those of
-- after (nil: as many), to be written (sem_done), and returns '#i' as
-- text, for a write that makes it.
local function bump(S, live, after)
  local i = sem_index(S.i, live)
  if i == 0 then
    i = tonumber(S.t[1]) * 1000000 + tonumber(S.t[2])
  else
    i = i + 1
  end
  S.i, S.dirty = i + (after or live), true
  return string.format('%d', S.i)
end

-- sem_done writes the index, if it moved since it was written, and returns
-- reply. A record it creates (with no holder: an old script's) gets the
-- retention, as keep_keys gives it.
local function sem_done(S, reply)
  if S.dirty then
    if redis.call('HSET', S.holders, '#i', string.format('%d', S.i)) == 1 and
        redis.call('PTTL', S.holders) < 0 then
      redis.call('PEXPIRE', S.holders, S.keep)
    end
    S.dirty = false
  end
  return reply
end

-- keep_keys makes the holder keys outlive the longest lease and the queue
-- (the limit in force lives in S.holders) by the fence retention (S.keep),
-- the index's life after its last change (see above), and no more.
-- no_queue: the caller knows that nobody waits (a permit taken at once,
-- which the queue's first alive waiter would have had), and so that there
-- is no queue to outlive: one command less.
local function keep_keys(S, now, no_queue)
  local ms = no_queue and -2 or redis.call('PTTL', S.queue)
  local last = redis.call('ZRANGE', S.leases, '-1', '-1', 'WITHSCORES')[2]
  if last then
    ms = math.max(ms, tonumber(last) - now)
  end
  if ms > 0 then
    ms = ms + tonumber(S.keep)
    redis.call('PEXPIRE', S.holders, ms)
    redis.call('PEXPIRE', S.leases, ms)
  end
end

-- sem_first is first_alive (lib_queue.lua), and moves the index on when it
-- drops a dead waiter (sem_inspect.lua counts it until then), live leases
-- being live. An empty queue costs one command, as first_alive's own look
-- does.
local function sem_first(S, now, live)
  local n = redis.call('ZCARD', S.queue)
  if n == 0 then
    return nil
  end
  local id, e = first_alive(S, now)
  if not id or redis.call('ZCARD', S.queue) < n then
    bump(S, live)
  end
  return id, e
end

-- add_holder gives a permit to token hash tok, with a lease of lease ms,
-- live leases being live before it, and returns its fencing token (a
-- string, and as a number); max_hold (ms, nil for none) is its hard cap, kept as its cap
-- (see lib_grant.lua grant). The write of the holder writes the index.
local function add_holder(S, t, now, live, tok, ttl, lease, sub, own, retention, provisional, max_hold, sm)
  local fence, fence_n = next_fence(S, t, retention)
  local h = {f = fence, s = sub, o = own, t = ttl, a = at_ms(t), sm = sm or nil}
  if provisional then
    h.p = 1
  end
  if max_hold then
    h.cap = string.format('%d', tonumber(h.a) + tonumber(max_hold))
  end
  redis.call('HSET', S.holders, tok, cjson.encode(h), '#i', bump(S, live, live + 1))
  S.dirty = false
  redis.call('ZADD', S.leases, string.format('%d', now + tonumber(lease)), tok)
  return fence, fence_n
end

-- holder_reply is the reply for a permit tok holds: {1, fencing token,
-- ttl ms, now ms, acquired at ms, handed}. A provisional permit is picked
-- up: its lease becomes the TTL asked for, from now, a change of the
-- index; live is then how many leases are live (nil: not known yet).
local function holder_reply(S, now, tok, handed, live)
  local h = cjson.decode(redis.call('HGET', S.holders, tok))
  if h.p then
    h.p = nil
    local i = bump(S, live or redis.call('ZCARD', S.leases))
    S.dirty = false
    redis.call('HSET', S.holders, tok, cjson.encode(h), '#i', i)
    redis.call('ZADD', S.leases, string.format('%d', now + capped(h.t, h.cap, now)), tok)
    keep_keys(S, now) -- the keys kept the hand-off's shorter lease
  end
  local ends = tonumber(redis.call('ZSCORE', S.leases, tok))
  return {1, tonumber(h.f), ends - now, now, tonumber(h.a), handed}
end

-- sem_handoff gives free permits to the waiters at the head of the queue,
-- in order, as long as there are permits; provisional ones (see
-- lib_handoff.lua handoff) to all but the caller, me. Returns whether me
-- got one, whether a permit is left free with nobody alive waiting (a
-- caller that does not wait may take it), and how many leases are live
-- (called after purge, as every script calls it). It keeps the keys
-- (keep_keys) only when it handed a permit on: what it takes away (a
-- lease, a waiter) never needs them kept longer.
local function sem_handoff(S, t, now, limit, retention, check_heard, me)
  local mine, handed, free = false, false, false
  local live = redis.call('ZCARD', S.leases) -- after purge: the live leases
  while live < limit do
    local id, e = sem_first(S, now, live)
    if not id then
      free = true
      break
    end
    handed = true
    dequeue(S, id)
    if id == me then
      add_holder(S, t, now, live, e.t, e.ttl, e.ttl, e.s, e.o, retention, false, e.cap)
      live, mine = live + 1, true
    else
      add_holder(S, t, now, live, e.t, e.ttl, math.min(tonumber(e.ttl), tonumber(e.l)), e.s, e.o, retention, true, e.cap)
      live = live + 1
      if not wake(e, id, check_heard) then -- its gateway is gone
        redis.call('HDEL', S.holders, e.t)
        redis.call('ZREM', S.leases, e.t)
        live = live - 1
      end
    end
  end
  if handed then
    keep_keys(S, now)
  end
  return mine, free, live
end

-- soonest is how long until the first lease ends, ms (0 when none).
local function soonest(S, now)
  local first = redis.call('ZRANGE', S.leases, '0', '0', 'WITHSCORES')[2]
  if not first then
    return 0
  end
  return math.max(tonumber(first) - now, 0)
end

