-- lib_record: the record of one grant (K.record, see lib_keys.lua), from
-- which a call whose token holds nothing learns why. RECORD_MS, and the
-- reasons (UNKNOWN, RELEASED, EXPIRED), are in protocol.lua. A library,
-- not a script on its own.

-- why says why the caller's token holds nothing.
local function why(K)
  local r = K.record and redis.call('GET', K.record)
  if r == 'r' then
    return RELEASED
  elseif r == 'h' then
    return EXPIRED -- it was granted and not released: its lease ended
  end
  return UNKNOWN
end

-- released notes that the caller's grant was released.
local function released(K)
  redis.call('SET', K.record, 'r', 'PX', RECORD_MS)
end
