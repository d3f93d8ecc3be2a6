-- lib_shared: the shared holders of a lock: fields 'r:<token hash>' of
-- K.lock, their leases in K.readers (see lib_keys.lua). A library, not a
-- script on its own.

-- shared_full reports whether the lock, held shared, has as many shared
-- holders as it may (K.max_readers): another one waits, or is refused. The
-- cap bounds what a lock costs to keep and to describe, and what one
-- caller can pile onto it.
local function shared_full(K)
  return K.max_readers > 0 and redis.call('ZCARD', K.readers) >= K.max_readers
end

-- keep_shared makes K.lock and K.readers live as long as the longest
-- shared lease, and deletes both when no shared holder is left.
local function keep_shared(K, now)
  local last = redis.call('ZRANGE', K.readers, -1, -1, 'WITHSCORES')[2]
  if not last or tonumber(last) <= now then
    redis.call('DEL', K.lock, K.readers)
    return
  end
  redis.call('PEXPIRE', K.lock, tonumber(last) - now)
  redis.call('PEXPIRE', K.readers, tonumber(last) - now)
end

-- purge_ended drops the shared holders whose lease has ended, records
-- each in the history, and returns whether there were any. With a lock
-- delay, a shared lease that ended unreleased keeps the lock unavailable
-- for the delay from now, even if the others release.
local function purge_ended(K, now)
  local ended = redis.call('ZRANGEBYSCORE', K.readers, '-inf', now, 'WITHSCORES')
  if #ended == 0 then
    return false
  end
  if K.delay_ms > 0 then
    redis.call('SET', K.delay, 'x:' .. string.format('%d', now + K.delay_ms), 'PX',
      math.max(redis.call('PTTL', K.delay), K.delay_ms))
  end
  for i = 1, #ended, 2 do
    local f = 'r:' .. ended[i]
    if K.hist_n > 0 then
      local r = redis.call('HGET', K.lock, f)
      if r then
        r = cjson.decode(r)
        event(K, 'expired', tonumber(ended[i + 1]), r.s, r.o, r.f)
      end
    end
    redis.call('HDEL', K.lock, f)
  end
  redis.call('ZREMRANGEBYSCORE', K.readers, '-inf', now)
  keep_shared(K, now)
  return true
end

-- add_reader gives token hash tok a shared hold of the lock (free, or
-- held shared) with a lease of lease ms, and returns its fencing token and
-- when it was acquired (ms), as grant does.
local function add_reader(K, t, now, tok, ttl, lease, sub, own, retention, provisional)
  local fence = next_fence(K, t, retention)
  local r = {f = fence, s = sub, o = own, t = ttl, a = at_ms(t)}
  if provisional then
    r.p = 1
  end
  redis.call('HSET', K.lock, 'tok', '', 'r:' .. tok, cjson.encode(r))
  redis.call('ZADD', K.readers, string.format('%d', now + tonumber(lease)), tok)
  keep_shared(K, now)
  return fence, r.a
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
-- provisional one is picked up: its lease becomes the TTL asked for.
local function reader_reply(K, now, tok, r, handed)
  if r.p then
    r.p = nil
    redis.call('HSET', K.lock, 'r:' .. tok, cjson.encode(r))
    redis.call('ZADD', K.readers, string.format('%d', now + tonumber(r.t)), tok)
    keep_shared(K, now)
  end
  local ttl = tonumber(r.t)
  if handed == 1 then
    ttl = tonumber(redis.call('ZSCORE', K.readers, tok)) - now
  end
  return {1, tonumber(r.f), ttl, now, tonumber(r.a), handed}
end
