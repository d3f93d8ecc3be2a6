-- session_acquire: take a lock (or, as session_sem_acquire, a permit) in a
-- session and note it there, in one step: session_join, the kind's
-- acquire and session_confirm at once, for an acquire
-- that does not wait, where the session and the lock are on one Redis
-- (not on Cluster, where they live on different slots; see
-- lib_session.lua). One call where three ran, and nothing pending between
-- them: the grant and its member exist together or not at all, so an end
-- of the session finds every grant it has, and a killed gateway leaves no
-- pending member behind.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua); or the
--             semaphore's keys, as sem_acquire.lua takes them
-- KEYS[3]     the session (see lib_session.lua)
-- ARGV[1..]   acquire.lua's (sem_acquire.lua's) arguments, for an acquire
--             that does not wait (ARGV[2], the lease, is set here: what is
--             left of the session's)
-- ARGV[n-4]   SHA-256 of the session token
-- ARGV[n-3]   the caller's subject
-- ARGV[n-2]   the grant's nonce
-- ARGV[n-1]   the grant: 'l' (a lock's) or 's' (a permit), then ns/name
-- ARGV[n]     how many grants the session may hold at most
--
-- Returns  the acquire's reply; its lease is what is left of the
--          session's, to the millisecond, as Redis holds it
--          {SESSION_ENDED}, {SESSION_NOT_YOURS}, {SESSION_FULL}: nothing
--          changed
--
-- Keyed, as acquire.lua and session_join.lua are: by the owner token, and
-- by the nonce, whose member a call delivered again finds noted (it then
-- counts against no cap: it is this grant's). lib_session.lua's functions
-- read the session as KEYS[1], so KEYS is the session's while they run,
-- and the lock's while acquire's body (acquire_main) runs and after.

local lock_keys_of_call = KEYS
local n = #ARGV
local tok, sub, nonce, hold, most = ARGV[n - 4], ARGV[n - 3], ARGV[n - 2], ARGV[n - 1], tonumber(ARGV[n])
for i = n - 4, n do
  ARGV[i] = nil
end
local member = 'm:' .. nonce

-- It runs only on a single Redis, where no slot migrates: no first read of
-- a key that never exists guards its writes (see once.lua).
KEYS = {lock_keys_of_call[3]}
local f, why = session_check(tok, sub)
if not f then
  KEYS = lock_keys_of_call
  return {why}
end
if session_full(most, member) then
  KEYS = lock_keys_of_call
  return {SESSION_FULL}
end
local left = redis.call('PTTL', KEYS[1])
KEYS = lock_keys_of_call
if left < 1 then
  return {SESSION_ENDED}
end
ARGV[2] = string.format('%d', left)
-- The grant names its member, so that its release by its holder marks
-- the member released (lib_grant.lua member_released), and the next
-- keep-alive lists it gone without renewing it: an exclusive grant in
-- the lock's hash, which goes when the grant ends; a shared one, and a
-- permit, in its hold's JSON (HOLD_FIELD, see lua.go inSession), which
-- goes with the hold. A grant made now writes it with its other fields
-- (SESSION_MEMBER); a call delivered again, which makes none, here.
local sm = member .. ' ' .. hold .. ' ' .. lock_keys_of_call[3]
local exclusive = HOLD_FIELD == 'r:' and ARGV[6] == MODE_EXCLUSIVE
SESSION_MEMBER = sm
local reply = acquire_main()
local written = SESSION_MEMBER == false
SESSION_MEMBER = nil
if reply[1] == GRANTED then
  redis.call('HSET', lock_keys_of_call[3], member, 'c' .. hold)
  if written then
    -- the grant wrote it
  elseif exclusive then
    redis.call('HSET', lock_keys_of_call[1], 'sm', sm)
  else
    local field = HOLD_FIELD .. ARGV[1]
    local r = redis.call('HGET', lock_keys_of_call[1], field)
    if r then
      r = cjson.decode(r)
      r.sm = sm
      redis.call('HSET', lock_keys_of_call[1], field, cjson.encode(r))
    end
  end
end
return reply
