-- release: delete the lock if the caller holds it, and tell waiters.
--
-- KEYS[1]  the lock hash, e.g. lockgate:{ns/name}
-- ARGV[1]  SHA-256 of the caller's owner token
-- ARGV[2]  the wake-up channel, e.g. lockgate:released
-- ARGV[3]  the message for waiters: the lock's name, e.g. ns/name
--
-- Returns  1   released
--          0   not held: released already, or the lease expired
--          -1  held by another grant
--
-- Compare and delete happen in one script: in Go, the lock could expire and
-- be taken by someone else between the GET and the DEL.

local tok = redis.call('HGET', KEYS[1], 'tok')
if not tok then
  return 0
end
if tok ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
