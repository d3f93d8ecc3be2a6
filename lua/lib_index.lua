-- lib_index: writing a namespace's index of lock names (see index.lua,
-- list.lua), which listing reads. It lists names, not grants: an entry
-- says that the name may be held until a time, and a grant or a renewal
-- rewrites it only when its lease would end past that time, less a margin
-- (INDEX_MARGIN_MS). So a name in steady use is written once per index
-- period (half the fence retention), not once per grant, and a release
-- writes nothing: an entry outlives its lock, and listing passes over the
-- names nobody holds, until a later write sweeps it (index_split).
-- Until when the index has a name is kept in the name's record
-- (lib_fence.lua: x, and the stamp of next_fence), which the grant reads
-- and writes anyway; index_keep (lib_fence.lua) decides, index_write
-- writes, index_add (below) keeps the layout.
--
-- On a single Redis the lock scripts write the index themselves (K.index,
-- the options' fifth field, see lib_keys.lua lock_keys), as a script there
-- may touch any key; the keys are not among KEYS, which nothing requires
-- there. On Cluster the index is on another slot than the lock: the
-- script appends {INDEX_DUE, 'ns/name', upto, left, ...} to its reply
-- (index_trailer), and the gateway writes the entry (index.lua, which
-- shares this library) before it answers, then notes it in the name
-- record (indexed.lua). It is advisory: no script reads it to decide who
-- holds what. A library, not a script on its own; it comes before
-- lib_fence.lua, which calls it.

-- How much earlier than the index's time a lease must end for a grant to
-- write nothing, at most (half the index period when that is shorter):
-- room for the two Redis clocks of a Cluster to drift apart over a period.
local INDEX_MARGIN_MS = 60000

-- INDEX_CALL holds the entries due on the index's node that the running
-- call has found (Cluster), by KEYS as RECORDS does (lib_fence.lua).
local INDEX_CALL = {}

-- INDEX_PERIODS holds, by retention (K.keep_ms), the index period (p,
-- ms: half the retention), the margin (m, see INDEX_MARGIN_MS: at most a
-- quarter of the retention) and the latest stamp (b: the period's
-- number, u: index_until of it, s: u as text, after a space). A function
-- library's top-level locals outlive a call (see OPTIONS in lib_keys.lua):
-- a stamp is made once per period, not once per grant.
local INDEX_PERIODS, INDEX_PERIODS_N = {}, 0

-- index_period returns K's entry of INDEX_PERIODS.
local function index_period(K)
  local q = INDEX_PERIODS[K.keep_ms]
  if not q then
    if INDEX_PERIODS_N >= 16 then
      INDEX_PERIODS, INDEX_PERIODS_N = {}, 0
    end
    q = {p = math.max(math.floor(K.keep_ms / 2), 1), b = -1,
      m = math.min(INDEX_MARGIN_MS, math.floor(K.keep_ms / 4))}
    INDEX_PERIODS[K.keep_ms], INDEX_PERIODS_N = q, INDEX_PERIODS_N + 1
  end
  return q
end

-- index_until is the time an entry written for a lease that ends at ms
-- gets: the end of the index period after the one ms is in. It is the
-- same for every lease that ends in one period, which is what lets a
-- grant without a history stamp its name record without reading it first
-- (next_fence), and at least one period later than ms.
local function index_until(K, ms)
  local p = index_period(K).p
  return (math.floor(ms / p) + 2) * p
end

-- index_stamp is index_until of now, as a number and as text after a
-- space, as the name record keeps it (lib_fence.lua next_fence).
local function index_stamp(K, now)
  local q = index_period(K)
  local b = (now - now % q.p) / q.p
  if b ~= q.b then
    q.b, q.u = b, (b + 2) * q.p
    q.s = ' ' .. string.format('%d', q.u)
  end
  return q.u, q.s
end

-- The index's layout. A namespace's index is a directory, prefix ..
-- 'names:{ns}', a sorted set, every score 0, of the low bounds of its
-- buckets (the first is ''), and the buckets, directory .. ':' .. low
-- bound, each a sorted set, every score 0, of the entries of the names
-- from its low bound up to the next bucket's. An entry is the name, a
-- space, and until when the index lists it: seconds on the Redis clock,
-- rounded up, as 4 bytes (index_entry). A name has one entry. A bucket
-- holds at most INDEX_SPLIT entries, so that Redis keeps it packed (a
-- listpack, below zset-max-listpack-entries, 128 by default): about 35
-- bytes an entry, where a sorted set past that size takes about 130 per
-- member. Both keys live as long as their latest entry; a bucket that
-- fills is swept of the entries past their time first, and split in two
-- only if that leaves it large (index_split), and each split drops from
-- the directory up to INDEX_PRUNE buckets that expired, in turn
-- (index_prune). The space sorts before every byte a name may hold, so
-- the buckets, in ZRANGEBYLEX order, list the names in name order.
local INDEX_SPLIT, INDEX_KEEP, INDEX_PRUNE = 120, 80, '4'

-- index_entry is name's entry, listing it until ms (rounded up to a second).
local function index_entry(name, ms)
  local s = math.ceil(ms / 1000)
  return name .. ' ' .. string.char(math.floor(s / 16777216) % 256, math.floor(s / 65536) % 256,
    math.floor(s / 256) % 256, s % 256)
end

-- index_entry_name is the name entry e lists.
local function index_entry_name(e)
  return string.sub(e, 1, -6)
end

-- index_entry_until is until when entry e lists its name, ms.
local function index_entry_until(e)
  local a, b, c, d = string.byte(e, -4, -1)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 1000
end

-- index_prune drops from the directory dir up to INDEX_PRUNE buckets that
-- expired (all their entries were past their time), after those the last
-- call looked at (kept in dir .. '#'), so that the directory of a
-- namespace whose names move on (names with a date, say) does not keep
-- the bounds of buckets long gone.
local function index_prune(dir)
  local cursor = dir .. '#'
  local from = redis.call('GET', cursor) or ''
  local los = redis.call('ZRANGEBYLEX', dir, '(' .. from, '+', 'LIMIT', '0', INDEX_PRUNE)
  for _, lo in ipairs(los) do
    if redis.call('EXISTS', dir .. ':' .. lo) == 0 then
      redis.call('ZREM', dir, lo)
    end
  end
  local ttl = redis.call('PTTL', dir)
  if ttl > 0 then
    redis.call('SET', cursor, los[#los] or '', 'PX', ttl)
  end
end

-- index_split sweeps the bucket (key bucket) that has passed INDEX_SPLIT
-- entries of those past their time (now, ms), and moves its upper half to
-- a bucket of its own if more than INDEX_KEEP are left.
local function index_split(dir, bucket, now)
  local live, stale = {}, {}
  for _, e in ipairs(redis.call('ZRANGE', bucket, '0', '-1')) do
    if index_entry_until(e) > now then
      live[#live + 1] = e
    else
      stale[#stale + 1] = e
    end
  end
  if #stale > 0 then
    redis.call('ZREM', bucket, unpack(stale))
  end
  if #live > INDEX_KEEP then
    local half = math.floor(#live / 2)
    local lo = index_entry_name(live[half + 1])
    local upper, moved = dir .. ':' .. lo, {}
    for i = half + 1, #live do
      moved[#moved + 1], moved[#moved + 2] = '0', live[i]
    end
    redis.call('ZADD', upper, unpack(moved))
    redis.call('ZREM', bucket, unpack(live, half + 1))
    redis.call('PEXPIRE', upper, redis.call('PTTL', bucket))
    redis.call('ZADD', dir, '0', lo)
  end
  index_prune(dir)
end

-- index_add makes the index whose directory is dir list name until upto
-- (ms on the Redis clock, now being its time), or later if it does so
-- already.
local function index_add(dir, name, upto, now)
  local lo = redis.call('ZREVRANGEBYLEX', dir, '[' .. name, '-', 'LIMIT', '0', '1')[1]
  if not lo then
    lo = ''
    redis.call('ZADD', dir, '0', '')
  end
  local bucket, e = dir .. ':' .. lo, index_entry(name, upto)
  local old = redis.call('ZRANGEBYLEX', bucket, '[' .. name .. ' ', '(' .. name .. '!', 'LIMIT', '0', '1')[1]
  if old then
    if index_entry_until(old) >= index_entry_until(e) then
      return
    end
    redis.call('ZREM', bucket, old)
  end
  redis.call('ZADD', bucket, '0', e)
  local left = index_entry_until(e) - now
  if redis.call('PTTL', bucket) < left then
    redis.call('PEXPIRE', bucket, left)
    if redis.call('PTTL', dir) < left then
      redis.call('PEXPIRE', dir, left)
    end
  end
  if not old and redis.call('ZCARD', bucket) > INDEX_SPLIT then
    index_split(dir, bucket, now)
  end
end

-- index_of returns the directory of K's namespace's index and K's name:
-- K.lock is prefix .. '{ns/name}'.
local function index_of(K)
  local tag = string.match(K.lock, '{([^{}]*)}$')
  local ns, name = string.match(tag, '^([^/]+)/(.+)$')
  return string.sub(K.lock, 1, #K.lock - #tag - 2) .. 'names:{' .. ns .. '}', name, tag
end

-- index_write makes the index list K's name until at least upto (ms on
-- the Redis clock, now being its time): at once on a single Redis; on
-- Cluster by the gateway (index.lua), told in the reply.
local function index_write(K, now, upto)
  if not K.index then
    local _, _, tag = index_of(K)
    if INDEX_CALL.keys ~= KEYS then
      INDEX_CALL = {keys = KEYS}
    end
    local t, n = INDEX_CALL, #INDEX_CALL
    t[n + 1], t[n + 2], t[n + 3] = tag, upto, upto - now
    return
  end
  local dir, name = index_of(K)
  index_add(dir, name, upto, now)
end

-- index_trailer appends the entries due on Cluster to the reply rp, as
-- {INDEX_DUE, tag, upto, left, ...}: the engine takes it off before it
-- reads the reply (once.lua keeps it, so that a repeated call writes them
-- too).
local function index_trailer(rp)
  if INDEX_CALL.keys ~= KEYS then
    return -- the usual call: nothing due
  end
  if type(rp) == 'table' then
    local t = {INDEX_DUE}
    for _, v in ipairs(INDEX_CALL) do
      t[#t + 1] = v
    end
    rp[#rp + 1] = t
  end
  INDEX_CALL = {}
end
AFTER_MAIN[#AFTER_MAIN + 1] = index_trailer
