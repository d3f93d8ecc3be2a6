-- index: make a namespace's index of lock names, which listing reads
-- (list.lua), list a name until a time. The index is advisory: no script
-- that grants or ends a lock reads it, so it can never change who holds
-- what. On Redis Cluster the gateway runs this when a lock script's reply
-- says the name's entry is due (lib_index.lua index_trailer), before it
-- answers the grant, since the index (one per namespace) and the lock (one
-- slot per lock) are on different slots, which no one script may touch
-- together; then it notes the entry in the name's record (indexed.lua).
-- On a single Redis the lock scripts write the same entries themselves
-- (lib_index.lua index_write).
--
-- KEYS[1]  the namespace's names: zset, every score 0, of lock names, so
--          that ZRANGEBYLEX pages in name order
-- KEYS[2]  the same names, scored by until when the index lists each (ms
--          on this node's clock)
-- ARGV[1]  the name
-- ARGV[2]  for how long from now the index lists it, ms: an entry only
--          ever moves later (ZADD GT)
--
-- Returns  how many entries past their time it dropped
--
-- Each call also drops up to STALE_PER_CALL entries past their time:
-- names whose last lease ended an index period or two before. Both keys
-- live as long as their latest entry.

local STALE_PER_CALL = '16'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], '0', ARGV[1])
redis.call('ZADD', KEYS[2], 'GT', string.format('%d', now + left), ARGV[1])
if redis.call('PTTL', KEYS[2]) < left then
  redis.call('PEXPIRE', KEYS[1], left)
  redis.call('PEXPIRE', KEYS[2], left)
end
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', '0', STALE_PER_CALL)
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
end
return #stale
