-- index: make a namespace's index of lock names (lib_index.lua), which
-- listing reads (list.lua), list a name until a time. The index is
-- advisory: no script that grants or ends a lock reads it, so it can never
-- change who holds what. On Redis Cluster the gateway runs this when a lock
-- script's reply says the name's entry is due (lib_index.lua
-- index_trailer), before it answers the grant, since the index (one per
-- namespace) and the lock (one slot per lock) are on different slots,
-- which no one script may touch together; then it notes the entry in the
-- name's record (indexed.lua). On a single Redis the lock scripts write the
-- same entries themselves (lib_index.lua index_write).
--
-- It also carries an index of layout 2 over (redisbackend.CheckLayout):
-- two sorted sets, the names scored 0 (KEYS[2]) and the same names scored
-- by until when each is listed, ms (KEYS[3]); an older gateway's entries
-- were 'name hold'.
--
-- KEYS[1]  the namespace's directory (lib_index.lua; its buckets are named
--          from it, under the same hash tag)
-- KEYS[2]  with no name: the namespace's names in layout 2
-- KEYS[3]  with no name: the same, scored by until when each is listed
-- ARGV[1]  the name; '' to carry over up to CARRY entries of layout 2
-- ARGV[2]  with a name: for how long from now the index lists it, ms: an
--          entry only ever moves later
--
-- Returns  0 with a name; else how many entries of layout 2 are left to
--          carry over (KEYS[2] and KEYS[3] are deleted once none are)

local CARRY = 256
local now = now_ms()
if ARGV[1] ~= '' then
  index_add(KEYS[1], ARGV[1], now + tonumber(ARGV[2]), now)
  return 0
end
local batch = redis.call('ZRANGE', KEYS[3], '0', tostring(CARRY - 1), 'WITHSCORES')
local members = {}
for i = 1, #batch, 2 do
  local m, upto = batch[i], tonumber(batch[i + 1])
  local name = string.match(m, '^(%S+)')
  if name and upto > now then
    index_add(KEYS[1], name, upto, now)
  end
  members[#members + 1] = m
end
if #members > 0 then
  redis.call('ZREM', KEYS[3], unpack(members))
  redis.call('ZREM', KEYS[2], unpack(members))
end
local left = redis.call('ZCARD', KEYS[3])
if left == 0 then
  redis.call('DEL', KEYS[2])
end
return left
