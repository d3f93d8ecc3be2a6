-- lib_index: the namespace's index of held locks (see index.lua, list.lua),
-- which the lock scripts keep themselves on a single Redis (K.index: the
-- options' fifth field, see lib_keys.lua lock_keys), where a script may
-- touch any key; on Cluster the index is on another slot than the lock,
-- and the gateway runs index.lua instead. It is advisory: no script reads
-- it to decide who holds what. The keys are not among KEYS, which on a
-- single Redis nothing requires. A library, not a script on its own.

-- index_of returns the index's two keys and the member of the grant whose
-- token hash is tok: K.lock is prefix .. '{ns/name}'.
local function index_of(K, tok)
  local tag = string.match(K.lock, '{([^{}]*)}$')
  local ns, name = string.match(tag, '^([^/]+)/(.+)$')
  local names = string.sub(K.lock, 1, #K.lock - #tag - 2) .. 'index:{' .. ns .. '}'
  return names, names .. ':ends', name .. ' ' .. string.sub(tok, 1, INDEX_HOLD_LEN)
end

-- index_add lists the grant of token hash tok, whose lease ends in left ms
-- from the time clock read.
local function index_add(K, tok, left)
  local names, ends, member = index_of(K, tok)
  local at = CLOCK.now + tonumber(left)
  redis.call('ZADD', names, '0', member)
  redis.call('ZADD', ends, string.format('%d', at), member)
  -- The index outlives its last lease by up to a minute: a stream of
  -- grants moves its expiry about once a minute, not at every grant (an
  -- entry past its lease is skipped, and dropped, by score).
  if redis.call('PTTL', ends) < tonumber(left) then
    redis.call('PEXPIRE', names, left + 60000)
    redis.call('PEXPIRE', ends, left + 60000)
  end
end

-- index_del takes the grant of token hash tok out of the index, and up to
-- 16 entries whose lease has ended with it (index.lua's STALE_PER_CALL).
local function index_del(K, tok, now)
  local names, ends, member = index_of(K, tok)
  redis.call('ZREM', names, member)
  redis.call('ZREM', ends, member)
  local stale = redis.call('ZRANGEBYSCORE', ends, '-inf', now, 'LIMIT', '0', '16')
  if #stale > 0 then
    redis.call('ZREM', names, unpack(stale))
    redis.call('ZREM', ends, unpack(stale))
  end
end
