-- list: one page of a namespace's index of held locks (see index.lua):
-- the names, in name order, of up to limit locks with a grant whose lease
-- has not ended. Read-only (EVALSHA_RO): entries whose lease ended are
-- passed over, and left for index.lua to drop. The engine then inspects
-- each name; the index may name a lock that is free by now, never the
-- reverse for a grant whose index write was made.
--
-- KEYS[1]  the namespace's entries by name (zset of 'name hold', score 0)
-- KEYS[2]  the same, scored by lease end (ms on this node's clock)
-- ARGV[1]  where the previous page stopped: '' for the start, else a
--          ZRANGEBYLEX bound, '(' and an entry, or '(name!' (past every
--          entry of name: '!' sorts after ' ' and before every byte a name
--          may hold)
-- ARGV[2]  limit: how many names at most
-- ARGV[3]  budget: how many entries at most this page may look at
--
-- Returns  {next, name...}: next is where the page stopped (ARGV[1] of
--          the next page), '' when the index has no more entries
--
-- The work is bounded by the budget, whatever the size of the keyspace or
-- of the index: each entry looked at costs one ZSCORE and a share of one
-- ZRANGEBYLEX, and a name taken skips its other entries (the other shared
-- holders) with one jump.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start, limit, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if start == '' then
  start = '-'
end
local out = {''}
local looked, last = 0, nil
while #out - 1 < limit and looked < budget do
  local batch = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0,
    math.min(limit - (#out - 1), budget - looked))
  if #batch == 0 then
    return out -- the end: next stays ''
  end
  for _, m in ipairs(batch) do
    looked = looked + 1
    local name = string.match(m, '^(%S+) ')
    if name and name ~= last then
      local ends = tonumber(redis.call('ZSCORE', KEYS[2], m))
      if ends and ends > now then
        out[#out + 1] = name
        last = name
      end
    end
    start = '(' .. m
  end
  if last and string.match(batch[#batch], '^(%S+) ') == last then
    start = '(' .. last .. '!' -- past the rest of this lock's entries
  end
end
out[1] = start
return out
