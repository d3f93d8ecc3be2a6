-- acquire: take the lock, or join its queue of waiters.
--
-- KEYS[1..5]  the lock, fence, queue, alive and waiters keys (see lib.lua)
-- ARGV[1]     SHA-256 of the new owner token (the token never reaches Redis)
-- ARGV[2]     lease TTL, ms
-- ARGV[3]     subject (who acquires)
-- ARGV[4]     owner label (may be empty)
-- ARGV[5]     how long the fencing counter outlives its last use, ms
-- ARGV[6]     waiter id; empty for an acquire that does not wait
-- ARGV[7]     the waiting gateway's channel, for the hand-off message
-- ARGV[8]     how long the caller waits at most, ms
-- ARGV[9]     how long a waiter counts as alive without a heartbeat, ms
-- ARGV[10]    '1' to drop a waiter whose gateway does not hear the hand-off
--             (exact on a single Redis; on Cluster PUBLISH counts one node)
--
-- Returns  {1, fencing_token, ttl_ms, now_ms}   granted (also when this
--                                              token already holds it: a
--                                              retried call, or a hand-off)
--          {0, pttl_ms, now_ms, rank}          held; a waiter is queued at
--                                              0-based rank (-1: not queued)
--
-- A free lock goes to the queue first: nobody who just arrived, or just
-- released, gets ahead of those already waiting.

local K = keys_of(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local tok_hash, ttl, me = ARGV[1], ARGV[2], ARGV[6]
local now, t = clock()

local function granted()
  local fence = tonumber(redis.call('HGET', K.lock, 'fence'))
  return {1, fence, redis.call('PTTL', K.lock), now}
end

local holder = redis.call('HGET', K.lock, 'tok')
if holder == tok_hash then
  if me ~= '' then
    dequeue(K, me)
  end
  return granted()
end

if not holder then
  local first = handoff(K, t, now, ARGV[5], ARGV[10])
  if first == me then
    return granted() -- our own gateway also got a hand-off message: ignored
  end
  if not first then
    if me ~= '' then
      dequeue(K, me)
    end
    local fence = grant(K, t, tok_hash, ttl, ARGV[3], ARGV[4], ARGV[5])
    return {1, fence, tonumber(ttl), now}
  end
end

local rank = -1
if me ~= '' then
  rank = redis.call('ZRANK', K.queue, me)
  if not rank then
    local deadline = now + tonumber(ARGV[8])
    local seq = redis.call('HINCRBY', K.waiters, '#seq', 1)
    redis.call('ZADD', K.queue, seq, me)
    redis.call('ZADD', K.alive,
      string.format('%d', math.min(deadline, now + tonumber(ARGV[9]))), me)
    redis.call('HSET', K.waiters, me, cjson.encode({
      g = ARGV[7], t = tok_hash, ttl = ttl, s = ARGV[3], o = ARGV[4],
      d = string.format('%d', deadline)}))
    -- The queue's keys outlive their last waiter by a minute, then go.
    local keep = tonumber(ARGV[8]) + 60000
    for _, k in ipairs({K.queue, K.alive, K.waiters}) do
      if redis.call('PTTL', k) < keep then
        redis.call('PEXPIRE', k, keep)
      end
    end
    rank = redis.call('ZRANK', K.queue, me)
  end
end
return {0, redis.call('PTTL', K.lock), now, rank}
