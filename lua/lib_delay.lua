-- lib_delay: the lock delay (K.delay, with --lock-delay, see lib_keys.lua):
-- whether it keeps a free lock from new holders, and for how long. A grant
-- sets it (lib_grant.lua note_grant), a shared lease that ended unreleased
-- moves it on (lib_shared.lua purge_ended), a release ends it
-- (lib_handoff.lua release_all). A library, not a script on its own.

-- delayed reports whether a lock nobody holds is kept from new holders by
-- the lock delay.
local function delayed(K)
  return K.delay_ms > 0 and redis.call('EXISTS', K.delay) == 1
end

-- retry_ms is how long until the lock may be free: the lease, or the lock
-- delay after one. With a history, a lock held shared keeps its hash past
-- the leases (lib_shared.lua keep_shared): the last lease's end says.
-- holder is the holder as the caller found it (current, or handoff's),
-- nil when it did not look: only a lock held shared ('') or one whose
-- holder is not known pays for that read.
local function retry_ms(K, holder)
  if holder == RESTING then
    -- Until the min hold's end, on TIME's clock, as the reply's now is
    -- (a PTTL counts from the time Redis took when the script began).
    local ms = math.max((tonumber(redis.call('HGET', K.lock, 'mh')) or CLOCK.now) - CLOCK.now, 0)
    if K.delay_ms > 0 then
      ms = math.max(ms, redis.call('PTTL', K.delay))
    end
    return ms
  end
  local ms = redis.call('PTTL', K.lock)
  if ms > 0 and K.hist_n > 0 and (holder == nil or holder == '') then
    local last = redis.call('ZRANGE', K.readers, '-1', '-1', 'WITHSCORES')[2]
    if last then
      ms = math.max(tonumber(last) - CLOCK.now, 0)
    end
  end
  if K.delay_ms > 0 then
    ms = math.max(ms, redis.call('PTTL', K.delay))
  end
  return ms
end
