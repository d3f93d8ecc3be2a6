-- renew: extend the caller's lease. Never recreates a lock that is gone.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name} (see lib.lua)
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the new TTL in milliseconds; "0" restores the TTL it was acquired with
--
-- Returns  {1, fencing_token, ttl_ms}  renewed
--          {0}                        not held: released, or the lease expired
--          {-1}                       held by another grant

local tok = redis.call('HGET', KEYS[1], 'tok')
if not tok then
  return {0}
end
if tok ~= ARGV[1] then
  return {-1}
end
local ttl = ARGV[2]
if ttl == '0' then
  ttl = redis.call('HGET', KEYS[1], 'ttl')
end
redis.call('PEXPIRE', KEYS[1], ttl)
local ik = redis.call('HGET', KEYS[1], 'ik') -- its idempotency record (idem_lib.lua)
if ik then
  redis.call('PEXPIRE', ik, tonumber(ttl) + 60000)
end
return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), tonumber(ttl)}
