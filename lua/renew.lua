-- renew: extend the caller's lease. Never recreates a lock that is gone.
--
-- KEYS[1..2]  the lock, and the caller's record (see lib_keys.lua)
-- ARGV[1]     SHA-256 of the caller's owner token
-- ARGV[2]     the new TTL in milliseconds; "0" restores the TTL it was
--             acquired with
-- ARGV[3]     the lock's options (see lock_keys)
--
-- Returns  {1, fencing_token, ttl_ms, shared[, cap_ms]}
--                                     renewed; shared is 1 for a shared
--                                     hold, 0 for the exclusive grant;
--                                     cap_ms, for a grant with a hard cap
--                                     (lib_grant.lua grant), is how long
--                                     until the cap ends it
--          {0, why}                   the token holds nothing: why is
--                                     RELEASED, EXPIRED, BROKEN or
--                                     UNKNOWN (see lib_record.lua)
--
-- A grant being broken with a period (break.lua) is renewed only up to the
-- period's end: the reply's ttl_ms says when it ends, and then it ends
-- broken. A renewal is a holder saying it is still at work, which the
-- period lets it be; refusing it would tell a holder it lost a lock it
-- still holds. A grant with a hard cap is renewed up to the cap alone, for
-- the same reason, and cap_ms tells its holder when it ends; at the cap, it
-- ends as a lease that runs out does.

local K = lock_keys(ARGV[3])
local now = clock()
local tok = current(K, now)
local r = tok == '' and reader(K, ARGV[1])
if tok ~= ARGV[1] and not r then
  return refused(K, 0)
end
local ttl, fence, be, shared, cap = ARGV[2], nil, nil, 0, nil
if r then -- held shared: the caller's lease is its own
  if ttl == '0' then
    ttl = r.t
  end
  be = tonumber(r.be)
  if be then
    ttl = math.min(tonumber(ttl), be - now)
  end
  cap = tonumber(r.cap)
  if cap then
    if cap <= now then -- its last millisecond: too late to renew
      return refused(K, 0)
    end
    ttl = math.min(tonumber(ttl), cap - now)
  end
  redis.call('ZADD', K.readers, string.format('%d', now + tonumber(ttl)), ARGV[1])
  keep_shared(K, now)
  keep_idem(r.ik, ttl)
  fence, shared = r.f, 1
  event(K, 'renewed', now, r.s, r.o, fence)
else
  local g = redis.call('HMGET', K.lock, 'ttl', 'be', 'bb', 'cap', 'ik', 'fence')
  if ttl == '0' then
    ttl = g[1]
  end
  be = tonumber(g[2])
  if be then
    if be <= now then -- its last millisecond: too late to renew
      return refused(K, 0)
    end
    ttl = math.min(tonumber(ttl), be - now)
  end
  cap = tonumber(g[4])
  if cap then
    if cap <= now then
      return refused(K, 0)
    end
    ttl = math.min(tonumber(ttl), cap - now)
  end
  redis.call('PEXPIRE', K.lock, ttl)
  keep_idem(g[5], ttl)
  fence = g[6]
  if K.hist_n > 0 then
    local f = holder_of(K)
    hold_note(K, now + tonumber(ttl), f, g[3] or nil, cap)
    event(K, 'renewed', now, f[2], f[3], fence)
  end
end
if cap then
  return settle(K, {1, tonumber(fence), tonumber(ttl), shared, cap - now}, be)
end
return settle(K, {1, tonumber(fence), tonumber(ttl), shared}, be)
