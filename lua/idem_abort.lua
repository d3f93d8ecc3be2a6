-- idem_abort: an acquire with an Idempotency-Key that was not granted, or
-- whose grant the gateway gave back, forgets its record, so that a retry
-- runs afresh.
--
-- KEYS[1]  the record (see idem_lib.lua)
-- ARGV[1]  the attempt's nonce
-- ARGV[2]  SHA-256 of the owner token of the grant the attempt gave back
--          ('' when it made none): a record of that grant is forgotten too
--          (idem_done ran, but its reply was lost, and the gateway released
--          the grant; the retry must not be told the key's grant ended)
--
-- Returns  1  forgotten
--          0  not this attempt's record: nothing changed

local st = redis.call('HMGET', KEYS[1], 'st', 'n', 'th')
if (st[1] == 'p' and st[2] == ARGV[1]) or (st[1] == 'd' and ARGV[2] ~= '' and st[3] == ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
