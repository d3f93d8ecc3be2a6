#!lua name=layout4prototype
-- A prototype, not product code: the common path of the one-record lock
-- that docs/PERFORMANCE.md ("The one record, priced whole") plans for #36,
-- written only far enough to price it under scripts/redis-instructions
-- (BenchmarkRedisScripts/layout4-prototype): an exclusive acquire that
-- does not wait, and its release by the holder. Everything else answers
-- "the full script's work" (-2). It goes when the layout it prices lands.
--
-- KEYS[1] the lock's record: a hash that outlives its lease by the fence
-- retention, its expiry moved once per half of it (x).
--   g    '<token hash> <lease end, ms> <fence> <acquired at> <ttl> <subject>\n<owner>',
--        '' when free
--   f    the last fencing token, kept past the grant
--   x    when the expiry (and the name's index entry) were last moved
--   rel  the token hash of the last release: a release or an acquire
--        delivered again finds it
--   rs   tokens whose acquire the gateway sent again or gave up on (only
--        after a fault): a copy of an older attempt takes nothing
--   w, o waiters, and any optional feature in use: the full script's work
-- A token's record (KEYS[1] .. ':r:' .. token hash) is written only when
-- a lease is found ended unreleased, and read only off the common path.
local RECORD_MS = 60000
local RETENTION_MS = 86400000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

redis.register_function('lean_acquire', function(KEYS, ARGV)
  local tok, ttl = ARGV[1], ARGV[2]
  local now, t = now_ms()
  local r = redis.call('HMGET', KEYS[1], 'g', 'f', 'w', 'o', 'x', 'rs', 'rel')
  local g = r[1]
  if g and g ~= '' then
    local htok, le = string.match(g, '^(%S+) (%d+)')
    le = tonumber(le)
    if le > now then
      if htok == tok then
        return {2, g}
      end
      return {0, le - now}
    end
    -- ended unreleased: its token's record says so
    redis.call('SET', KEYS[1] .. ':r:' .. htok, 'x', 'NX', 'PX', RECORD_MS)
  end
  if r[7] == tok then
    return {-1}
  end
  if r[3] or r[4] or r[6] then
    return {-2} -- the full script's work
  end
  local us = t[1] .. string.format('%06d', tonumber(t[2]))
  local fence = us
  if r[2] and #r[2] >= #us and r[2] >= us then
    fence = string.format('%d', tonumber(r[2]) + 1)
  end
  local le = now + tonumber(ttl)
  redis.call('HSET', KEYS[1], 'g', tok .. ' ' .. string.format('%d', le) .. ' ' .. fence .. ' ' .. now .. ' ' .. ttl .. ' ' .. ARGV[3] .. '\n' .. ARGV[4], 'f', fence)
  if not r[5] or tonumber(r[5]) + RETENTION_MS / 2 < now then
    redis.call('HSET', KEYS[1], 'x', now)
    redis.call('PEXPIRE', KEYS[1], RETENTION_MS)
  end
  return {1, fence, now}
end)

redis.register_function('lean_release', function(KEYS, ARGV)
  local tok = ARGV[1]
  local now = now_ms()
  local r = redis.call('HMGET', KEYS[1], 'g', 'w', 'o')
  local g = r[1]
  if g and g ~= '' then
    local htok, le = string.match(g, '^(%S+) (%d+)')
    if htok == tok and tonumber(le) > now then
      if r[2] or r[3] then
        return -2
      end
      redis.call('HSET', KEYS[1], 'g', '', 'rel', tok)
      return 1
    end
  end
  local rec = redis.call('GET', KEYS[1] .. ':r:' .. tok)
  if rec then
    return {-1, rec}
  end
  return 0
end)
