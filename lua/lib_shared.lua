-- lib_shared: the shared holders of a lock: fields 'r:<token hash>' of
-- K.lock, their leases in K.readers (see lib_keys.lua). A library, not a
-- script on its own.

-- capped is ms of lease from now, or less: what is left until cap, a
-- grant's hard cap (lib_grant.lua grant; a shared hold's cap, add_reader) (ms on the Redis clock; nil for none), at least 1 ms
-- (a lease past its cap has ended already, so a script that finds the
-- grant finds a millisecond of it at most).
local function capped(ms, cap, now)
  cap = tonumber(cap)
  if cap then
    return math.max(math.min(tonumber(ms), cap - now), 1)
  end
  return tonumber(ms)
end

-- shared_full reports whether the lock, held shared, has as many shared
-- holders as it may (K.max_readers): another one waits, or is refused. The
-- cap bounds what a lock costs to keep and to describe, and what one
-- caller can pile onto it.
local function shared_full(K)
  return K.max_readers > 0 and redis.call('ZCARD', K.readers) >= K.max_readers
end

-- keep_shared makes K.lock and K.readers live as long as the longest
-- shared lease, and deletes both when no shared holder is left. With a
-- history, they live on as long as the history would after it: a shared
-- lease that ends unreleased (or by a break period, K.lock's 'bk': the
-- latest such end, see break.lua) is recorded by the first script to run
-- after it (purge_ended), which finds it only if both keys are still
-- there, the last holder's too (a lease's end writes nothing by itself).
-- So K.lock's PTTL is no shared lease's end: retry_ms (lib_delay.lua)
-- reads the last lease's.
local function keep_shared(K, now)
  local last = redis.call('ZRANGE', K.readers, '-1', '-1', 'WITHSCORES')[2]
  if not last or tonumber(last) <= now then
    redis.call('DEL', K.lock, K.readers)
    return
  end
  local ms = tonumber(last) - now
  if K.hist_n > 0 then
    ms = ms + K.keep_ms
    local bk = tonumber(redis.call('HGET', K.lock, 'bk'))
    if bk then
      ms = math.max(ms, bk - now + K.keep_ms)
    end
  end
  redis.call('PEXPIRE', K.lock, ms)
  redis.call('PEXPIRE', K.readers, ms)
end

-- purge_ended drops the shared holders whose lease has ended, records
-- each in the history (broken, by its breaker, when a break period ended
-- it: see break.lua), and returns whether there were any. With a lock
-- delay, a shared lease that ended unreleased, and not by a break, keeps
-- the lock unavailable for the delay from now, even if the others release.
local function purge_ended(K, now)
  local ended = redis.call('ZRANGEBYSCORE', K.readers, '-inf', now, 'WITHSCORES')
  if #ended == 0 then
    return false
  end
  local lapsed = false
  for i = 1, #ended, 2 do
    local f = 'r:' .. ended[i]
    local r = (K.hist_n > 0 or K.delay_ms > 0) and redis.call('HGET', K.lock, f)
    if r then
      r = cjson.decode(r)
      if r.bb then
        event(K, 'broken', tonumber(ended[i + 1]), r.s, r.o, r.f, nil, r.bb)
      elseif r.cap and tonumber(ended[i + 1]) >= tonumber(r.cap) then
        lapsed = true
        event(K, 'max_hold', tonumber(ended[i + 1]), r.s, r.o, r.f)
      else
        lapsed = true
        event(K, 'expired', tonumber(ended[i + 1]), r.s, r.o, r.f)
      end
    end
    redis.call('HDEL', K.lock, f)
  end
  if K.delay_ms > 0 and lapsed then
    redis.call('SET', K.delay, 'x:' .. string.format('%d', now + K.delay_ms), 'PX',
      math.max(redis.call('PTTL', K.delay), K.delay_ms))
  end
  redis.call('ZREMRANGEBYSCORE', K.readers, '-inf', now)
  keep_shared(K, now)
  return true
end

-- add_reader gives token hash tok a shared hold of the lock (free, or
-- held shared) with a lease of lease ms, and returns its fencing token and
-- when it was acquired (ms), as grant does; max_hold (ms, nil for none) is
-- its hard cap, kept as the hold's cap: until when, as grant's. sm, when
-- set, is the hold's session member, kept in its JSON (see grant).
local function add_reader(K, t, now, tok, ttl, lease, sub, own, retention, provisional, max_hold, sm)
  local fence, fence_n = next_fence(K, t, retention)
  local r = {f = fence, s = sub, o = own, t = ttl, a = at_ms(t), sm = sm or nil}
  if provisional then
    r.p = 1
  end
  if max_hold then
    r.cap = string.format('%d', tonumber(r.a) + tonumber(max_hold))
  end
  redis.call('HSET', K.lock, 'tok', '', 'r:' .. tok, cjson.encode(r))
  redis.call('ZADD', K.readers, string.format('%d', now + tonumber(lease)), tok)
  keep_shared(K, now)
  return fence, r.a, fence_n
end

-- reader returns the shared hold of token hash tok, decoded, or nil.
local function reader(K, tok)
  local r = redis.call('HGET', K.lock, 'r:' .. tok)
  return r and cjson.decode(r)
end

-- drop_reader ends the shared hold of token hash tok.
local function drop_reader(K, now, tok)
  redis.call('HDEL', K.lock, 'r:' .. tok)
  redis.call('ZREM', K.readers, tok)
  keep_shared(K, now)
end

-- reader_reply is held_by for the shared hold r of token hash tok; a
-- provisional one is picked up: its lease becomes the TTL asked for, up to
-- its hard cap.
local function reader_reply(K, now, tok, r, handed)
  if r.p then
    r.p = nil
    redis.call('HSET', K.lock, 'r:' .. tok, cjson.encode(r))
    redis.call('ZADD', K.readers, string.format('%d', now + capped(r.t, r.cap, now)), tok)
    keep_shared(K, now)
  end
  local ttl = tonumber(r.t)
  if handed == 1 then
    ttl = tonumber(redis.call('ZSCORE', K.readers, tok)) - now
  end
  return {1, tonumber(r.f), ttl, now, tonumber(r.a), handed}
end
