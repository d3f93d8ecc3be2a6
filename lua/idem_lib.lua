-- idem_lib: functions the idempotency scripts share, put in front of each
-- of them (see locks/idempotency.go for the protocol).
--
-- The keys of one idempotency record (R below), in KEYS in this order:
--   R.record   hash: st ('p' pending: the first call still runs; 'd'
--              done), rq (the request's fingerprint), n (the pending
--              attempt's nonce), c (the owner token, encrypted with a key
--              that only the client's Idempotency-Key gives: Redis never
--              holds a usable token), th (SHA-256 of the owner token), f
--              (the fencing token); its PEXPIRE is how long the key is
--              remembered
--   R.lock     for a lock's record: the lock's hash (see lib_keys.lua); or
--   R.holders, R.leases  for a permit's record: the semaphore's (see
--              semlib.lua)
-- The record's key has the lock's (the semaphore's) hash tag, so that one
-- script reaches both on Redis Cluster.
--
-- A done record is attached to its grant (the lock hash's field 'ik', a
-- shared hold's or a permit's 'ik'), so that renew.lua, reenter.lua and sem_renew.lua keep
-- the record until 60000 ms (IdempotencyGrace) after the lease they set.

local function idem_keys()
  if #KEYS == 2 then
    return {record = KEYS[1], lock = KEYS[2]}
  end
  return {record = KEYS[1], holders = KEYS[2], leases = KEYS[3]}
end

-- idem_live returns what remains of the lease of the grant whose token
-- hash is th (ms), its holds and its hard cap (ms on the Redis clock, nil
-- for none: see lib_grant.lua grant), or nil when that grant has ended.
local function idem_live(R, now, th)
  if R.lock then
    local tok = redis.call('HGET', R.lock, 'tok')
    if tok == '' then -- held shared: th's own hold and lease (see lib_keys.lua)
      local r = redis.call('HGET', R.lock, 'r:' .. th)
      -- The readers key shares the lock's hash tag: the same slot.
      local ends = tonumber(redis.call('ZSCORE', R.lock .. ':readers', th))
      if not r or not ends or ends <= now then
        return nil
      end
      r = cjson.decode(r)
      return ends - now, hold_count(r.hs), tonumber(r.cap)
    end
    if tok ~= th then
      return nil
    end
    local g = redis.call('HMGET', R.lock, 'hs', 'cap')
    return redis.call('PTTL', R.lock), hold_count(g[1] or nil), tonumber(g[2])
  end
  local ends = tonumber(redis.call('ZSCORE', R.leases, th))
  local h = ends and ends > now and redis.call('HGET', R.holders, th)
  if not h then
    return nil
  end
  return ends - now, 1, tonumber(cjson.decode(h).cap)
end

-- idem_attach marks the live grant th with its record's key.
local function idem_attach(R, th)
  if R.lock then
    local r = redis.call('HGET', R.lock, 'r:' .. th)
    if r then -- a shared hold
      r = cjson.decode(r)
      r.ik = R.record
      redis.call('HSET', R.lock, 'r:' .. th, cjson.encode(r))
    else
      redis.call('HSET', R.lock, 'ik', R.record)
    end
    return
  end
  local h = cjson.decode(redis.call('HGET', R.holders, th))
  h.ik = R.record
  redis.call('HSET', R.holders, th, cjson.encode(h))
end
