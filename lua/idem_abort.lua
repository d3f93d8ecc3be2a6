-- idem_abort: an acquire with an Idempotency-Key that was not granted
-- forgets its pending record, so that a retry runs afresh.
--
-- KEYS[1]  the record (see idem_lib.lua)
-- ARGV[1]  the attempt's nonce
--
-- Returns  1  forgotten
--          0  not this attempt's pending record: nothing changed

local st = redis.call('HMGET', KEYS[1], 'st', 'n')
if st[1] == 'p' and st[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
