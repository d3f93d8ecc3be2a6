-- reenter: the holder of a lock takes it once more (a re-entrant hold), in
-- the mode it holds it.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- KEYS[2]  its readers (shared holders' leases)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the TTL asked for, ms: the lease becomes at least this long
--          from now, and is never shortened
-- ARGV[3]  's' to re-enter a shared hold, 'x' an exclusive one
--
-- Returns  {1, fencing_token, ttl_ms, holds}  re-entered; holds counts the
--                                            holds now
--          {0}                              not held: released, or the
--                                            lease expired
--          {-1}                             held by another grant
--          {-2, pttl_ms}                    the caller holds it in the
--                                            other mode: nothing changed
--
-- Every hold shares the one lease: a holder that stops renewing loses all
-- its holds at once. A release takes one hold away; the last one frees the
-- lock (or, when shared, the caller's share of it).

local K = {lock = KEYS[1], readers = KEYS[2]}
local tok = redis.call('HGET', K.lock, 'tok')
if not tok then
  return {0}
end
if tok == '' then
  local now = clock()
  purge_readers(K, now)
  local r = reader(K, ARGV[1])
  if not r then
    return {-1}
  end
  if ARGV[3] ~= 's' then
    return {-2, redis.call('PTTL', K.lock)}
  end
  r.h = (tonumber(r.h) or 1) + 1
  r.p = nil -- a hold of a provisional grant picks it up
  redis.call('HSET', K.lock, 'r:' .. ARGV[1], cjson.encode(r))
  local ends = math.max(tonumber(redis.call('ZSCORE', K.readers, ARGV[1])), now + tonumber(ARGV[2]))
  redis.call('ZADD', K.readers, string.format('%d', ends), ARGV[1])
  keep_shared(K, now)
  return {1, tonumber(r.f), ends - now, r.h}
end
if tok ~= ARGV[1] then
  return {-1}
end
if ARGV[3] == 's' then
  return {-2, redis.call('PTTL', K.lock)}
end
local holds = (tonumber(redis.call('HGET', K.lock, 'holds')) or 1) + 1
redis.call('HSET', K.lock, 'holds', holds)
redis.call('HDEL', K.lock, 'p') -- a hold of a provisional grant picks it up
local ttl = redis.call('PTTL', K.lock)
if ttl < tonumber(ARGV[2]) then
  ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', K.lock, ttl)
end
return {1, tonumber(redis.call('HGET', K.lock, 'fence')), ttl, holds}
