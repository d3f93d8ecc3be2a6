-- lib_record: the record of one grant (K.record, see lib_keys.lua), from
-- which a call whose token holds nothing learns why. RECORD_MS, and the
-- reasons (UNKNOWN, RELEASED, EXPIRED, BROKEN), are in protocol.lua. A library,
-- not a script on its own.

-- RECORD_PX is RECORD_MS as text, as a command takes it (see OPTIONS in
-- lib_keys.lua).
local RECORD_PX = RECORD_MS .. ''

-- why says why the caller's token holds nothing.
local function why(K)
  local r = K.record and redis.call('GET', K.record)
  if r == 'r' then
    return RELEASED
  elseif r == 'h' then
    return EXPIRED -- it was granted and not released: its lease ended
  elseif r == 'b' then
    return BROKEN -- an administrator ended it (break.lua)
  end
  return UNKNOWN
end

-- released notes that the caller's grant was released.
local function released(K)
  redis.call('SET', K.record, 'r', 'PX', RECORD_PX)
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
