-- session_open: open a session (see lib_session.lua).
--
-- KEYS[1]  the session
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the subject that opens it
-- ARGV[3]  its lease, ms
--
-- Returns  {GRANTED, ttl_ms}
--
-- The token is new (128 random bits), so the key is: HSET and PEXPIRE in
-- one script leave no session without a lease.

redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'sub', ARGV[2], 'ttl', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {GRANTED, tonumber(ARGV[3])}
