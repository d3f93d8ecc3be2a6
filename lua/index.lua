-- index: keep a namespace's index of held locks, which listing reads
-- (list.lua). The index is advisory: no script that grants or ends a lock
-- reads it, so it can never change who holds what. The gateway runs this
-- after a grant, renewal or release that it made, since on Redis Cluster
-- the index (one per namespace) and the lock (one slot per lock) are on
-- different slots, which no one script may touch together.
--
-- KEYS[1]  the namespace's entries by name: zset, every score 0, of
--          members 'name hold' (hold: a prefix of the grant's token
--          hash), so that ZRANGEBYLEX pages in name order
-- KEYS[2]  the same members, scored by when the grant's lease ends, ms
--          on this node's clock
-- ARGV[1]  'add' (a grant), 'extend' (a renewal: only an entry still
--          there, and only later) or 'del' (a release)
-- ARGV[2]  the member, 'name hold'
-- ARGV[3]  what is left of the lease, ms (add, extend)
--
-- Returns  how many entries whose lease had ended it dropped
--
-- Each call also drops up to STALE_PER_CALL entries whose lease ended
-- (expired without a release, or released by a gateway that died first):
-- a namespace's index costs what its live grants cost, plus what one
-- write can clean per call. Both keys live as long as their last lease.

local STALE_PER_CALL = '16'
local op, member = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if op == INDEX_DEL then
  redis.call('ZREM', KEYS[1], member)
  redis.call('ZREM', KEYS[2], member)
else
  local left = tonumber(ARGV[3])
  local ends = string.format('%d', now + left)
  if op == INDEX_ADD then
    redis.call('ZADD', KEYS[1], '0', member)
    redis.call('ZADD', KEYS[2], ends, member)
  elseif redis.call('ZADD', KEYS[2], 'XX', 'GT', 'CH', ends, member) == 0 then
    left = 0 -- gone (released meanwhile), or already later
  end
  if left > 0 and redis.call('PTTL', KEYS[2]) < left then
    redis.call('PEXPIRE', KEYS[1], left)
    redis.call('PEXPIRE', KEYS[2], left)
  end
end
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', '0', STALE_PER_CALL)
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
end
return #stale
