-- break: end every grant of the lock, whoever holds it (the exclusive one,
-- or every shared one), now or at the end of a break period, and hand the
-- lock to the waiters at the head of its queue, as a release does. An
-- administrator's step: the gateway decides who may; the script needs no
-- owner token.
--
-- KEYS[1]     the lock (see lib_keys.lua); no record: the
--             breaker does not know whose grants it ends (see broken)
-- ARGV[1]     how long the fencing counter outlives its last use, ms
-- ARGV[2]     '1' to drop a waiter whose gateway does not hear the hand-off
-- ARGV[3]     the lock's options (see lock_keys)
-- ARGV[4]     the caller's gateway channel (optional): the next waiter, if
--             it waits on that gateway for an exclusive hold, gets a full
--             grant, told in the reply instead of by a message
-- ARGV[5]     who breaks it (the breaker's subject), for the history
-- ARGV[6]     the break period, ms: '0' (or none) ends the grants now
--
-- Returns  {1, broken, left_ms}  the grants ended (left_ms 0), and the lock
--                       was handed on, if anyone waits; or, with a period,
--                       the grants end broken in left_ms at the latest
--          {1, broken, 0, waiter id, fencing_token, ttl_ms, now_ms, acquired_at_ms}
--                       ended, and handed in full to that waiter of the
--                       caller's gateway, which delivers it
--          {0}          nobody held the lock: nothing changed
--
-- Without a period, every grant ends, and the next one is made, in one
-- script: there is no moment at which a broken grant and the next one both
-- exist. With one, each grant's lease becomes its break's end: the least
-- of its lease, the period from now, and the end of an earlier break (a
-- second break shortens a period, never lengthens it). Until then its
-- holder works on, renews (up to that end: renew.lua, reenter.lua) and may
-- release it as usual. Its lease then ends as any lease does, so that the
-- scripts that hand on a lock whose lease ran out (heartbeat.lua, any
-- acquire) hand it on, with no script to run at that moment; the grant
-- notes its breaker ('bb', its end 'be': in K.lock, or in the shared
-- hold), so that the history says broken, by whom, not expired
-- (check_expired, purge_ended). A provisional grant ends now whatever the
-- period: its holder has not begun. Each broken grant's record says 'b'
-- from the break on (lib_record.lua), so that its holder's renew,
-- re-entry or release after the end answers BROKEN.

local K = lock_keys(ARGV[3])
local now, t = clock()
local tok = current(K, now)
if not tok then
  return {0}
elseif tok == RESTING then
  -- No grant, but a released one's min hold (lib_handoff.lua rest): the
  -- break ends it, and the lock goes on.
  redis.call('DEL', K.lock)
end
local by, period = ARGV[5], tonumber(ARGV[6]) or 0
K.ev = {}
local ended, n, left = {}, 0, 0

-- until_ms is when a grant whose lease ends at lease_ms, and whose earlier
-- break (if any) ends at be, ends under this break; at or before now when
-- it ends now.
local function until_ms(lease_ms, be, provisional)
  if period <= 0 or provisional then
    return now
  end
  return math.min(lease_ms, now + period, be or lease_ms)
end

if tok == '' then
  local rs = redis.call('ZRANGE', K.readers, 0, -1, 'WITHSCORES')
  for i = 1, #rs, 2 do
    local r, h = rs[i], reader(K, rs[i])
    n = n + 1
    local be = h and tonumber(h.be)
    local ends = until_ms(tonumber(rs[i + 1]), be, h and h.p)
    if not h or ends <= now then
      ended[#ended + 1] = r
      if h then
        event(K, 'broken', now, h.s, h.o, h.f, nil, by)
      end
      redis.call('HDEL', K.lock, 'r:' .. r)
      redis.call('ZREM', K.readers, r)
    else
      if not be or ends < be then
        h.be, h.bb = string.format('%d', ends), by
      end
      redis.call('HSET', K.lock, 'r:' .. r, cjson.encode(h))
      redis.call('ZADD', K.readers, string.format('%d', ends), r)
      keep_idem(h.ik, ends - now)
      broken(K, r, ends - now)
      left = math.max(left, ends - now)
    end
  end
  if left > 0 and K.hist_n > 0 then
    redis.call('HSET', K.lock, 'bk', string.format('%d', now + left))
  end
  keep_shared(K, now)
elseif tok ~= RESTING then
  n = 1
  local f = redis.call('HMGET', K.lock, 'fence', 'sub', 'own', 'p', 'be', 'bb', 'ik')
  local be = tonumber(f[5])
  local ends = until_ms(now + redis.call('PTTL', K.lock), be, f[4])
  if ends <= now then
    ended[1] = tok
    event(K, 'broken', now, f[2], f[3], f[1], nil, by)
    redis.call('DEL', K.lock)
    drop_note(K)
  else
    local bb = f[6]
    if not be or ends < be then
      bb = by
      redis.call('HSET', K.lock, 'be', string.format('%d', ends), 'bb', by)
    end
    left = ends - now
    redis.call('PEXPIRE', K.lock, left)
    keep_idem(f[7] or nil, left)
    hold_note(K, ends, f, bb)
    broken(K, tok, left)
    -- The lock delay guards against a holder whose lease ended unnoticed;
    -- this one is told when its grant ends, and the lock is the next
    -- holder's then.
    if K.delay_ms > 0 and redis.call('GET', K.delay) == 'g' then
      redis.call('SET', K.delay, 'g', 'PX', left)
    end
  end
end
for _, h in ipairs(ended) do
  broken(K, h)
end
local h = {}
if left == 0 then
  lift_delay(K, now)
  h = handoff(K, t, now, nil, ARGV[1], ARGV[2], nil, ARGV[4])
end
local ev = K.ev
K.ev = nil
if #ev > 0 then
  push_events(K, ev, K.ev_extends)
end
if h.near then
  local g = h.near_reply
  return {GRANTED, n, 0, h.near, g[2], g[3], g[4], g[5]}
end
return {GRANTED, n, left}
