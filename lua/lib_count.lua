-- lib_count: a subject's count of live sessions, moved by sessions_of.lua
-- (which describes the key, as lib_keys.lua does a lock's) and, on a
-- single Redis, by session_open.lua, session_keep.lua and session_end.lua
-- in the same call as the session. A library, not a script on its own.
--
-- KEYS[1]  none: the functions take the count's key
-- Returns  nothing: a library

-- count_expire makes the count at key live as long as its longest session.
local function count_expire(key, now)
  local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2]
  if last and tonumber(last) > now then
    redis.call('PEXPIRE', key, tonumber(last) - now)
  end
end

-- count_add counts session id at key, live until ends (ms on the Redis
-- clock, now ms now), unless the subject has most live sessions already:
-- then it returns false and changes nothing. A session counted already
-- (a call delivered again) counts once.
local function count_add(key, id, ends, now, most)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if not redis.call('ZSCORE', key, id) and redis.call('ZCARD', key) >= most then
    return false
  end
  redis.call('ZADD', key, string.format('%d', ends), id)
  count_expire(key, now)
  return true
end

-- count_extend moves session id's end in the count at key to ends (ms on
-- the Redis clock, now ms now), if the count has it, and makes the key
-- live as long as its longest session.
local function count_extend(key, id, ends, now)
  redis.call('ZADD', key, 'XX', string.format('%d', ends), id)
  count_expire(key, now)
end
