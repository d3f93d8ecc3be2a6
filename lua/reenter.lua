-- reenter: the holder of a lock takes it once more (a re-entrant hold), in
-- the mode it holds it.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     the TTL asked for, ms: the lease becomes at least this long
--             from now, and is never shortened
-- ARGV[3]     's' to re-enter a shared hold, 'x' an exclusive one
-- ARGV[4]     the lock's options (see lock_keys)
-- ARGV[5]     the new hold's id (see holds.lua), made by the gateway
--
-- Returns  {1, fencing_token, ttl_ms, holds[, cap_ms]}
--                                            re-entered, now or by an
--                                            earlier call with this hold
--                                            id (then nothing changed);
--                                            holds counts the holds now;
--                                            cap_ms, for a grant with a
--                                            hard cap, how long until it
--                                            ends it (see renew.lua)
--          {0, why}                         the token holds nothing: why
--                                            is RELEASED, EXPIRED or
--                                            UNKNOWN (see lib_record.lua)
--          {-2, pttl_ms}                    the caller holds it in the
--                                            other mode: nothing changed
--
-- Every hold shares the one lease: a holder that stops renewing loses all
-- its holds at once. A release ends one hold, by its id; the last one frees
-- the lock (or, when shared, the caller's share of it). A grant being
-- broken with a period (break.lua) is re-entered, but its lease never
-- passes the period's end (as renew.lua), nor a hard cap.

local K = lock_keys(ARGV[4])
local now = clock()
local tok = current(K, now)
local r = tok == '' and reader(K, ARGV[1])
if tok ~= ARGV[1] and not r then
  return refused(K, NOT_GRANTED)
end
if (r and ARGV[3] ~= MODE_SHARED) or (not r and ARGV[3] == MODE_SHARED) then
  return unchanged({OTHER_MODE, retry_ms(K, tok)})
end
local hold = ARGV[5]
if r then
  if has_hold(r.hs, hold) then
    return {GRANTED, tonumber(r.f), tonumber(redis.call('ZSCORE', K.readers, ARGV[1])) - now, hold_count(r.hs)}
  end
  r.hs = with_hold(r.hs, hold)
  r.p = nil -- a hold of a provisional grant picks it up
  redis.call('HSET', K.lock, 'r:' .. ARGV[1], cjson.encode(r))
  local ends = math.max(tonumber(redis.call('ZSCORE', K.readers, ARGV[1])), now + tonumber(ARGV[2]))
  local be, cap = tonumber(r.be), tonumber(r.cap)
  if be then
    ends = math.min(ends, be)
  end
  if cap then
    ends = math.min(ends, cap)
  end
  redis.call('ZADD', K.readers, string.format('%d', ends), ARGV[1])
  keep_shared(K, now)
  keep_idem(r.ik, ends - now)
  event(K, 're_entered', now, r.s, r.o, r.f)
  if cap then
    return settle(K, {GRANTED, tonumber(r.f), ends - now, hold_count(r.hs), cap - now}, be)
  end
  return settle(K, {GRANTED, tonumber(r.f), ends - now, hold_count(r.hs)}, be)
end
-- PTTL counts from the time Redis took when the script began, which may
-- be a millisecond before now: a lease that ends at the cap would read a
-- millisecond past cap - now, so an answer's lease is cut to the cap's end
-- (the reply's cap_ms), as read with now.
-- One read of what the exclusive re-entry needs (the subject and owner
-- only for a history, below).
local g = redis.call('HMGET', K.lock, 'hs', 'fence', 'cap', 'be', 'bb', 'ik', 'p')
local hs, fence = g[1], tonumber(g[2])
if has_hold(hs, hold) then
  local ttl, cap = redis.call('PTTL', K.lock), tonumber(g[3])
  if cap then
    return {GRANTED, fence, math.min(ttl, cap - now), hold_count(hs), cap - now}
  end
  return {GRANTED, fence, ttl, hold_count(hs)}
end
hs = with_hold(hs, hold)
redis.call('HSET', K.lock, 'hs', hs)
if g[7] then
  redis.call('HDEL', K.lock, 'p') -- a hold of a provisional grant picks it up
end
local f = K.hist_n > 0 and holder_of(K)
local be, cap, want = tonumber(g[4]), tonumber(g[3]), tonumber(ARGV[2])
if be then
  want = math.min(want, be - now)
end
if cap then
  want = math.min(want, cap - now)
end
local ttl = redis.call('PTTL', K.lock)
if ttl < want then
  ttl = want
  redis.call('PEXPIRE', K.lock, ttl)
  keep_idem(g[6], ttl)
  if f then
    hold_note(K, now + ttl, f, g[5] or nil, cap)
  end
end
if f then
  event(K, 're_entered', now, f[2], f[3], f[1])
end
if cap then
  return settle(K, {GRANTED, fence, math.min(ttl, cap - now), hold_count(hs), cap - now}, be)
end
return settle(K, {GRANTED, fence, ttl, hold_count(hs)}, be)
