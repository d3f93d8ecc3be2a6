-- acquire: take a free lock, or say how long the current holder has left.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name}
-- KEYS[2]  the fencing counter, e.g. lockgate:{ns/name}:fence (same hash tag)
-- ARGV[1]  SHA-256 of the new owner token (the token itself never reaches Redis)
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  subject (who acquires)
-- ARGV[4]  owner label (may be empty)
-- ARGV[5]  how long the fencing counter outlives its last use, in milliseconds
--
-- Returns  {1, fencing_token, ttl_ms}  granted (also when this very token
--                                      already holds it: a retried call)
--          {0, pttl_ms}                held by someone else
--
-- The lock hash has fields tok (token hash), fence, sub, own, at (acquired,
-- ms on the Redis clock) and ttl (the TTL asked for, restored by a renew
-- without a TTL); its PEXPIRE is the lease.

local tok = redis.call('HGET', KEYS[1], 'tok')
if tok then
  if tok == ARGV[1] then
    return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('PTTL', KEYS[1])}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end

-- Fencing tokens must grow across every acquisition, even when the counter
-- was lost (FLUSHALL, a restart without persistence). A lost counter is
-- seeded from the Redis clock in microseconds: the counter grows by one per
-- acquisition, far slower than the clock, so the seed is past every token
-- handed out before, as long as the clock does not go back.
local now = redis.call('TIME')
local fence
if redis.call('EXISTS', KEYS[2]) == 1 then
  fence = redis.call('INCR', KEYS[2])
else
  -- Lua numbers are doubles: build the 16-digit value as a string so that no
  -- conversion rounds it.
  local seed = now[1] .. string.format('%06d', tonumber(now[2]))
  redis.call('SET', KEYS[2], seed)
  fence = tonumber(seed)
end
redis.call('PEXPIRE', KEYS[2], ARGV[5])

local at = now[1] .. string.format('%03d', math.floor(tonumber(now[2]) / 1000))
redis.call('HSET', KEYS[1],
  'tok', ARGV[1], 'fence', string.format('%d', fence),
  'sub', ARGV[3], 'own', ARGV[4], 'at', at, 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence, tonumber(ARGV[2])}
