-- semlib: functions the semaphore scripts share, put after the lock
-- libraries (lib_*.lua) in front of each of them.
--
-- The keys of one semaphore, all with the hash tag {ns/name}, under a
-- prefix of their own ('sem:') so that a semaphore and a lock of the same
-- name never meet (S below; the queue keys are as for a lock, see lib_keys.lua):
--   S.holders  hash: SHA-256 of an owner token -> JSON {f: fencing token,
--              s: subject, o: owner label, a: acquired at ms, t: ttl asked
--              for, p: 1 while provisional, cap: its hard cap, as K.lock's
--              (lib_keys.lua; absent for none)}; field '#limit' is the limit
--              in force while anyone holds or waits
--   S.leases   zset: token hash -> ms on the Redis clock when its lease ends
--   S.fence, S.queue, S.alive, S.waiters   as K.fence ... K.waiters
--   S.record   the caller's record, as K.record (absent for scripts
--              without a caller's token); semaphores have no lock delay
--
-- A lease that ends frees its permit at once: every script first drops
-- the holders whose lease ended (purge), so no script ever counts one.

local function sem_keys(holders, leases, fence, queue, alive, waiters, record)
  return {holders = holders, leases = leases, fence = fence, queue = queue,
    alive = alive, waiters = waiters, record = record, delay_ms = 0}
end

-- purge drops the holders whose lease has ended.
local function purge(S, now)
  local ended = redis.call('ZRANGEBYSCORE', S.leases, '-inf', now)
  for _, tok in ipairs(ended) do
    redis.call('HDEL', S.holders, tok)
  end
  if #ended > 0 then
    redis.call('ZREMRANGEBYSCORE', S.leases, '-inf', now)
  end
end

-- keep_keys makes the holder keys outlive the longest lease and the queue
-- (the limit in force lives in S.holders), and no more.
local function keep_keys(S, now)
  local ms = redis.call('PTTL', S.queue)
  local last = redis.call('ZRANGE', S.leases, '-1', '-1', 'WITHSCORES')[2]
  if last then
    ms = math.max(ms, tonumber(last) - now)
  end
  if ms > 0 then
    redis.call('PEXPIRE', S.holders, ms)
    redis.call('PEXPIRE', S.leases, ms)
  end
end

-- add_holder gives a permit to token hash tok, with a lease of lease ms,
-- and returns its fencing token (a string); max_hold (ms, nil for none) is
-- its hard cap, kept as its cap (see lib_grant.lua grant).
local function add_holder(S, t, now, tok, ttl, lease, sub, own, retention, provisional, max_hold)
  local fence = next_fence(S, t, retention)
  local h = {f = fence, s = sub, o = own, t = ttl,
    a = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))}
  if provisional then
    h.p = 1
  end
  if max_hold then
    h.cap = string.format('%d', tonumber(h.a) + tonumber(max_hold))
  end
  redis.call('HSET', S.holders, tok, cjson.encode(h))
  redis.call('ZADD', S.leases, string.format('%d', now + tonumber(lease)), tok)
  return fence
end

-- holder_reply is the reply for a permit tok holds: {1, fencing token,
-- ttl ms, now ms, acquired at ms, handed}. A provisional permit is picked
-- up: its lease becomes the TTL asked for, from now.
local function holder_reply(S, now, tok, handed)
  local h = cjson.decode(redis.call('HGET', S.holders, tok))
  if h.p then
    h.p = nil
    redis.call('HSET', S.holders, tok, cjson.encode(h))
    redis.call('ZADD', S.leases, string.format('%d', now + capped(h.t, h.cap, now)), tok)
    keep_keys(S, now) -- the keys kept the hand-off's shorter lease
  end
  local ends = tonumber(redis.call('ZSCORE', S.leases, tok))
  return {1, tonumber(h.f), ends - now, now, tonumber(h.a), handed}
end

-- sem_handoff gives free permits to the waiters at the head of the queue,
-- in order, as long as there are permits; provisional ones (see
-- lib_handoff.lua handoff) to all but the caller, me. Returns true when me
-- got one.
local function sem_handoff(S, t, now, limit, retention, check_heard, me)
  local mine = false
  while redis.call('ZCARD', S.leases) < limit do
    local id, e = first_alive(S, now)
    if not id then
      break
    end
    dequeue(S, id)
    if id == me then
      add_holder(S, t, now, e.t, e.ttl, e.ttl, e.s, e.o, retention, false, e.cap)
      mine = true
    else
      add_holder(S, t, now, e.t, e.ttl, math.min(tonumber(e.ttl), tonumber(e.l)), e.s, e.o, retention, true, e.cap)
      if not wake(e, id, check_heard) then -- its gateway is gone
        redis.call('HDEL', S.holders, e.t)
        redis.call('ZREM', S.leases, e.t)
      end
    end
  end
  keep_keys(S, now)
  return mine
end

-- soonest is how long until the first lease ends, ms (0 when none).
local function soonest(S, now)
  local first = redis.call('ZRANGE', S.leases, '0', '0', 'WITHSCORES')[2]
  if not first then
    return 0
  end
  return math.max(tonumber(first) - now, 0)
end

