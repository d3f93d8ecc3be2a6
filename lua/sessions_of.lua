-- sessions_of: a subject's live sessions, counted for its bound (see
-- locks.SessionCounter): a zset of session ids scored by when each
-- session's lease ends, on the Redis clock. A key of its own per subject,
-- apart from the sessions' records (on Cluster, another slot), which the
-- gateway moves with one call more when it opens, keeps alive or ends a
-- session on Cluster (on a single Redis the session's own scripts move it:
-- session_open.lua, session_keep.lua, session_end.lua, lib_count.lua).
-- Idempotent: a call delivered twice counts once.
--
-- KEYS[1]  the subject's sessions (zset: session id -> lease end, ms)
-- ARGV[1]  'add', 'extend' or 'remove'
-- ARGV[2]  the session id
-- ARGV[3]  its lease from now, ms ('add', 'extend')
-- ARGV[4]  how many live sessions the subject may have ('add')
--
-- Returns  GRANTED, or SESSION_FULL for an 'add' past the bound (nothing
--          changed)

local now = now_ms()
local op, id = ARGV[1], ARGV[2]
if op == 'remove' then
  redis.call('ZREM', KEYS[1], id)
  return GRANTED
end
local ends = now + tonumber(ARGV[3])
if op == 'extend' then
  count_extend(KEYS[1], id, ends, now)
  return GRANTED
end
if not count_add(KEYS[1], id, ends, now, tonumber(ARGV[4])) then
  return SESSION_FULL
end
return GRANTED
