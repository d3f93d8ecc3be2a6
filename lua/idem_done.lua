-- idem_done: the last step of an acquire with an Idempotency-Key that was
-- granted. Records the grant, and attaches the record to it.
--
-- KEYS[1..]  the record, then the lock's hash, or the semaphore's holders
--            and leases (see idem_lib.lua)
-- ARGV[1]    the request's fingerprint
-- ARGV[2]    this attempt's nonce
-- ARGV[3]    SHA-256 of the grant's owner token
-- ARGV[4]    the owner token, encrypted (see locks/idempotency.go)
-- ARGV[5]    the grant's fencing token
-- ARGV[6]    how long the record outlives the grant's lease, ms
--
-- Returns  {1, remembered_ms}  recorded, for that long (the lease plus
--                              ARGV[6]; renewals move it on)
--          {0}                 another attempt holds the record (this
--                              one's pending record had expired):
--                              nothing changed
--
-- A pending record that expired (the attempt outlived it) is taken back,
-- unless another attempt began meanwhile.

local R = idem_keys()
local st = redis.call('HMGET', R.record, 'st', 'n')
if st[1] and (st[1] ~= 'p' or st[2] ~= ARGV[2]) then
  return {0}
end
local ttl = idem_live(R, now_ms(), ARGV[3])
if ttl then
  idem_attach(R, ARGV[3])
else
  ttl = 0
end
local keep = ttl + tonumber(ARGV[6])
redis.call('DEL', R.record)
redis.call('HSET', R.record, 'st', 'd', 'rq', ARGV[1], 'c', ARGV[4], 'th', ARGV[3], 'f', ARGV[5])
redis.call('PEXPIRE', R.record, keep)
return {1, keep}
