-- reenter: the holder of a lock takes it once more (a re-entrant hold).
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the TTL asked for, ms: the lease becomes at least this long
--          from now, and is never shortened
--
-- Returns  {1, fencing_token, ttl_ms, holds}  re-entered; holds counts the
--                                            holds now
--          {0}                              not held: released, or the
--                                            lease expired
--          {-1}                             held by another grant
--
-- Every hold shares the one lease: a holder that stops renewing loses all
-- its holds at once. A release takes one hold away; the last one frees the
-- lock.

local tok = redis.call('HGET', KEYS[1], 'tok')
if not tok then
  return {0}
end
if tok ~= ARGV[1] then
  return {-1}
end
local holds = (tonumber(redis.call('HGET', KEYS[1], 'holds')) or 1) + 1
redis.call('HSET', KEYS[1], 'holds', holds)
redis.call('HDEL', KEYS[1], 'p') -- a hold of a provisional grant picks it up
local ttl = redis.call('PTTL', KEYS[1])
if ttl < tonumber(ARGV[2]) then
  ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  local ik = redis.call('HGET', KEYS[1], 'ik') -- its idempotency record (idem_lib.lua)
  if ik then
    redis.call('PEXPIRE', ik, ttl + 60000)
  end
end
return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), ttl, holds}
