-- session_open: open a session (see lib_session.lua), and on a single
-- Redis count it among its subject's live sessions in the same call.
--
-- KEYS[1]  the session
-- KEYS[2]  on a single Redis, with a bound: the subject's count of live
--          sessions (see sessions_of.lua)
-- ARGV[1]  SHA-256 of the session token
-- ARGV[2]  the subject that opens it
-- ARGV[3]  its lease, ms
-- ARGV[4]  with KEYS[2]: the session's id
-- ARGV[5]  with KEYS[2]: how many live sessions the subject may have
--
-- Returns  {GRANTED, ttl_ms}
--          {SESSION_FULL}  the subject has its most live sessions: nothing
--                          changed
--
-- The token is new (128 random bits), so the key is: HSET and PEXPIRE in
-- one script leave no session without a lease. A call delivered again
-- finds its session counted already, which counts once.

if KEYS[2] then
  local now = now_ms()
  if not count_add(KEYS[2], ARGV[4], now + tonumber(ARGV[3]), now, tonumber(ARGV[5])) then
    return {SESSION_FULL}
  end
end
redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'sub', ARGV[2], 'ttl', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {GRANTED, tonumber(ARGV[3])}
