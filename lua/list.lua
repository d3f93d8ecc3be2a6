-- list: one page of a namespace's index of lock names (see index.lua):
-- the names, in name order, of up to limit locks that the index lists
-- still. Read-only (EVALSHA_RO): entries past their time are passed over,
-- and left for the index's writes to drop. The index lists a name from
-- its grant on until an index period or two after its last lease, so it
-- names free locks too: on a single Redis this script passes over a name
-- whose lock has no key, and the engine then inspects each name it
-- returns, and passes over those it finds free. It never leaves out a name
-- whose grant was answered while its lease lasts (lib_index.lua).
--
-- KEYS[1]  the namespace's names (zset, score 0)
-- KEYS[2]  the same, scored by until when the index lists each (ms on
--          this node's clock)
-- ARGV[1]  where the previous page stopped: '' for the start, else a
--          ZRANGEBYLEX bound, '(' and an entry, or '(name!' (past every
--          entry of name: '!' sorts after ' ' and before every byte a name
--          may hold)
-- ARGV[2]  limit: how many names at most
-- ARGV[3]  budget: how many entries at most this page may look at
-- ARGV[4]  on a single Redis, the namespace's lock keys up to the name
--          ('prefix{ns/'): a name whose key (that, the name, '}') does not
--          exist is free, and passed over; '' on Cluster, where the lock
--          is on another slot
--
-- Returns  {next, name...}: next is where the page stopped (ARGV[1] of
--          the next page), '' when the index has no more entries
--
-- The work is bounded by the budget, whatever the size of the keyspace or
-- of the index: each entry looked at costs one ZSCORE, an EXISTS on a
-- single Redis, and a share of one ZRANGEBYLEX. (An index written by an
-- older gateway has entries 'name hold', one per grant: a name taken
-- skips its other entries with one jump.)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start, limit, budget, keys = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] or ''
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
    local name = string.match(m, '^(%S+)')
    if name and name ~= last then
      local ends = tonumber(redis.call('ZSCORE', KEYS[2], m))
      if ends and ends > now and (keys == '' or redis.call('EXISTS', keys .. name .. '}') == 1) then
        out[#out + 1] = name
        last = name
      end
    end
    start = '(' .. m
    if m == name then
      start = start .. '!' -- past an older gateway's entries of name too
    end
  end
  local tail = string.match(batch[#batch], '^(%S+)')
  if last and tail == last then
    start = '(' .. last .. '!' -- past the rest of this lock's entries
  end
end
out[1] = start
return out
