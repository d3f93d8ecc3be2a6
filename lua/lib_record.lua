-- lib_record: the record of one grant (K.record, see lib_keys.lua), from
-- which a call whose token holds nothing learns why. RECORD_MS, and the
-- reasons (UNKNOWN, RELEASED, EXPIRED, BROKEN), are in protocol.lua. A library,
-- not a script on its own.

-- RECORD_PX is RECORD_MS as text, as a command takes it (see OPTIONS in
-- lib_keys.lua).
local RECORD_PX = RECORD_MS .. ''

-- guard_migrating is the first command of a keyed script (see once.lua) that
-- has no read of its own of a key that may not exist: it reads one that
-- never does, so that on Cluster, while the lock's slot migrates, Redis
-- stops the script here, before it writes anything. Only on Cluster: a
-- script that knows it runs on a single Redis (single: a lock's K.index,
-- as its scripts write the index themselves there, see lock_keys; a
-- semaphore's check_heard '1', exact there and only there, see
-- locks/redisbackend NewRedis) skips it, as no slot migrates there.
local function guard_migrating(single)
  if single then
    return
  end
  redis.call('EXISTS', KEYS[1] .. ':c:')
end

-- why_released says why the caller's token holds nothing and, when its
-- grant was released, when that grant was made (ms, on Redis's clock) and
-- the id of the call that released it (see released), so that a release
-- re-sent answers again what it did.
local function why_released(K)
  local r = K.record and redis.call('GET', K.record)
  local c = r and string.sub(r, 1, 1)
  if c == 'r' then
    local at, by = string.match(r, '^r(%d+):(.*)$')
    return RELEASED, at and at + 0 or 0, by
  elseif c == 'h' then
    return EXPIRED -- it was granted and not released: its lease ended
  elseif c == 'b' then
    return BROKEN -- an administrator ended it (break.lua)
  end
  return UNKNOWN -- never granted; 'f': fenced off before it was (fenced)
end

-- why says why the caller's token holds nothing: why_released's first
-- value alone, for a reply's last element ({NOT_GRANTED, why(K)}) takes
-- every value a call returns.
local function why(K)
  return (why_released(K))
end

-- refused is the reply {code, why(K)} of a call whose token holds nothing.
-- A token whose grant was released never holds again, so that refusal is
-- final: once.lua keeps no record of it (unchanged in protocol.lua). Any
-- other refusal keeps its record: a token never granted, or whose grant
-- expired or was broken before its waiter picked it up, may be a waiter's,
-- to be handed the lock later, and a copy of the call delivered after that
-- grant must change nothing.
local function refused(K, code)
  local reason = why(K)
  if reason ~= RELEASED then
    return {code, reason}
  end
  return unchanged({code, reason})
end

-- released notes that the caller's grant, made at at (ms on Redis's clock,
-- as the grant's text has it), was released by the call that runs:
-- 'r<at>:<CALL_ID>'. The time of the grant, not how long it was held: a
-- release that nothing else asks the time of reads no clock (TIME costs
-- the lock's cycle about 8 000 Redis instructions), and the gateway counts
-- how long it was held from the grant's time.
local function released(K, at)
  redis.call('SET', K.record, 'r' .. at .. ':' .. CALL_ID, 'PX', RECORD_PX)
end

-- fenced notes that the caller's token is given up before it was ever
-- granted (leave.lua, for a call whose outcome is unknown): an acquire
-- with it that Redis receives only now finds the record, and takes nothing.
local function fenced(K)
  redis.call('SET', K.record, 'f', 'NX', 'PX', RECORD_PX)
end

-- broken notes that the grant of token hash tok was ended by a break
-- (break.lua), now or, with a break period, in left ms: its holder may
-- still renew or release it until then (an ordinary release makes it 'r'),
-- and the record says 'b' from now, so that a call after the period's end
-- learns BROKEN with no script to run at that moment. Its record's key
-- shares the lock's hash tag, so it is on the script's slot; it is not
-- among KEYS, as the breaker does not know whose grants it ends.
local function broken(K, tok, left)
  redis.call('SET', K.lock .. ':t:' .. tok, 'b', 'PX', (left or 0) + RECORD_MS)
end
