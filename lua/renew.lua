-- renew: extend the caller's lease. Never recreates a lock that is gone.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- KEYS[2]  its readers (shared holders' leases)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the new TTL in milliseconds; "0" restores the TTL it was acquired with
--
-- Returns  {1, fencing_token, ttl_ms}  renewed
--          {0}                        not held: released, or the lease expired
--          {-1}                       held by another grant

local K = {lock = KEYS[1], readers = KEYS[2]}
local tok = redis.call('HGET', K.lock, 'tok')
if not tok then
  return {0}
end
if tok == '' then -- held shared: the caller's lease is its own
  local now = clock()
  purge_readers(K, now)
  local r = reader(K, ARGV[1])
  if not r then
    return {-1}
  end
  local ttl = ARGV[2]
  if ttl == '0' then
    ttl = r.t
  end
  redis.call('ZADD', K.readers, string.format('%d', now + tonumber(ttl)), ARGV[1])
  keep_shared(K, now)
  return {1, tonumber(r.f), tonumber(ttl)}
end
if tok ~= ARGV[1] then
  return {-1}
end
local ttl = ARGV[2]
if ttl == '0' then
  ttl = redis.call('HGET', K.lock, 'ttl')
end
redis.call('PEXPIRE', K.lock, ttl)
return {1, tonumber(redis.call('HGET', K.lock, 'fence')), tonumber(ttl)}
