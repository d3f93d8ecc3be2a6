-- list: one page of a namespace's index of lock names (lib_index.lua): the
-- names, in name order, of up to limit locks that the index lists still.
-- Read-only (FCALL_RO): entries past their time are passed over, and left
-- for the index's writes to drop. The index lists a name from its grant on
-- until an index period or two after its last lease, so it names free
-- locks too: on a single Redis this script passes over a name whose lock
-- has no key, and the engine then inspects each name it returns, and
-- passes over those it finds free. It never leaves out a name whose grant
-- was answered while its lease lasts (lib_index.lua).
--
-- KEYS[1]  the namespace's directory (its buckets are named from it)
-- ARGV[1]  where the previous page stopped: '' for the start, else '(' and
--          the last name it looked at, then '!' (or, from a gateway of
--          layout 2 or older, a space and a hold): the page starts after
--          that name
-- ARGV[2]  limit: how many names at most
-- ARGV[3]  budget: how many entries (and buckets) at most this page may
--          look at
-- ARGV[4]  on a single Redis, the namespace's lock keys up to the name
--          ('prefix{ns/'): a name whose key (that, the name, '}') does not
--          exist is free, and passed over; '' on Cluster, where the lock
--          is on another slot
--
-- Returns  {next, name...}: next is where the page stopped (ARGV[1] of
--          the next page), '' when the index has no more entries
--
-- The work is bounded by the budget, whatever the size of the keyspace or
-- of the index: each entry looked at costs a share of one ZRANGEBYLEX,
-- and an EXISTS on a single Redis; each bucket one ZRANGEBYLEX of the
-- directory.

local now = now_ms()
local dir, limit, budget, keys = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] or ''
local after = string.match(ARGV[1], '^%(([^ !]+)')
local lo, from
if after then
  lo = redis.call('ZREVRANGEBYLEX', dir, '[' .. after, '-', 'LIMIT', '0', '1')[1]
  from = '(' .. after .. '!'
end
if not lo then
  lo = redis.call('ZRANGEBYLEX', dir, '-', '+', 'LIMIT', '0', '1')[1]
end
local out, looked = {''}, 0
while lo do
  looked = looked + 1
  local want = math.min(limit - (#out - 1), budget - looked)
  if want <= 0 then
    out[1] = from or ''
    return out
  end
  local batch = redis.call('ZRANGEBYLEX', dir .. ':' .. lo, from or '-', '+', 'LIMIT', '0', want)
  for _, e in ipairs(batch) do
    looked = looked + 1
    local name = index_entry_name(e)
    if index_entry_until(e) > now and (keys == '' or redis.call('EXISTS', keys .. name .. '}') == 1) then
      out[#out + 1] = name
    end
    from = '(' .. name .. '!'
  end
  if #batch == want then
    if #out - 1 >= limit or looked >= budget then
      out[1] = from
      return out
    end
  else
    lo = redis.call('ZRANGEBYLEX', dir, '(' .. lo, '+', 'LIMIT', '0', '1')[1]
  end
end
return out -- the end: next stays ''
