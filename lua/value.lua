-- value: change the value of the caller's exclusive grant (see K.lock's
-- field v in lib_keys.lua). Never recreates a lock that is gone, and
-- leaves the lease as it is.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     the new value; '' for none
-- ARGV[3]     the lock's options (see lock_keys)
--
-- Returns  {1, fencing_token}  changed
--          {0, why}            the token holds nothing: why is RELEASED,
--                              EXPIRED or UNKNOWN (see lib_record.lua)
--          {OTHER_MODE}        the token holds the lock shared: a shared
--                              hold carries no value
--
-- Atomic: the check that the token holds the lock and the write are one
-- step, as for renew, so a value is never written to someone else's grant.

local K = lock_keys(ARGV[3])
local now = clock()
local tok = current(K, now)
if tok == '' and reader(K, ARGV[1]) then
  return unchanged({OTHER_MODE})
end
if tok ~= ARGV[1] then
  return refused(K, 0)
end
if ARGV[2] == '' then
  redis.call('HDEL', K.lock, 'v')
else
  redis.call('HSET', K.lock, 'v', ARGV[2])
end
local f = holder_of(K)
event(K, 'value_changed', now, f[2], f[3], f[1], ARGV[2])
return {1, tonumber(f[1])}
