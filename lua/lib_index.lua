-- lib_index: writing a namespace's index of lock names (see index.lua,
-- list.lua), which listing reads. It lists names, not grants: an entry,
-- the name, says that the name may be held until a time (its score in
-- the second set), and a grant or a renewal rewrites it only when its
-- lease would end past that time, less a margin (INDEX_MARGIN_MS). So a
-- name in steady use is written once per index period (half the fence
-- retention), not once per grant, and a release writes nothing: an entry
-- outlives its lock, and listing passes over the names nobody holds.
-- Until when the index has a name is kept in the name's record
-- (lib_fence.lua: x, and the stamp of next_fence), which the grant reads
-- and writes anyway; index_keep (lib_fence.lua) decides, index_write
-- writes.
--
-- On a single Redis the lock scripts write the index themselves (K.index,
-- the options' fifth field, see lib_keys.lua lock_keys), as a script there
-- may touch any key; the keys are not among KEYS, which nothing requires
-- there. On Cluster the index is on another slot than the lock: the
-- script appends {INDEX_DUE, 'ns/name', upto, left, ...} to its reply
-- (index_trailer), and the gateway writes the entry (index.lua) before it
-- answers, then notes it in the name record (indexed.lua). It is advisory:
-- no script reads it to decide who holds what. A library, not a script on
-- its own; it comes before lib_fence.lua, which calls it.

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
  local b = math.floor(now / q.p)
  if b ~= q.b then
    q.b, q.u = b, (b + 2) * q.p
    q.s = ' ' .. string.format('%d', q.u)
  end
  return q.u, q.s
end

-- index_of returns the index's two keys and K's name: K.lock is
-- prefix .. '{ns/name}'.
local function index_of(K)
  local tag = string.match(K.lock, '{([^{}]*)}$')
  local ns, name = string.match(tag, '^([^/]+)/(.+)$')
  local names = string.sub(K.lock, 1, #K.lock - #tag - 2) .. 'index:{' .. ns .. '}'
  return names, names .. ':ends', name, tag
end

-- index_write makes the index list K's name until at least upto (ms on
-- the Redis clock, now being its time): at once on a single Redis, along
-- with up to 16 entries of names past their time (index.lua's
-- STALE_PER_CALL); on Cluster by the gateway, told in the reply.
local function index_write(K, now, upto)
  local names, ends, name, tag = index_of(K)
  if not K.index then
    if INDEX_CALL.keys ~= KEYS then
      INDEX_CALL = {keys = KEYS}
    end
    local t, n = INDEX_CALL, #INDEX_CALL
    t[n + 1], t[n + 2], t[n + 3] = tag, upto, upto - now
    return
  end
  local at = string.format('%d', upto)
  redis.call('ZADD', names, '0', name)
  redis.call('ZADD', ends, 'GT', at, name)
  if redis.call('PTTL', ends) < upto - now then
    redis.call('PEXPIRE', names, upto - now)
    redis.call('PEXPIRE', ends, upto - now)
  end
  local stale = redis.call('ZRANGEBYSCORE', ends, '-inf', now, 'LIMIT', '0', '16')
  if #stale > 0 then
    redis.call('ZREM', names, unpack(stale))
    redis.call('ZREM', ends, unpack(stale))
  end
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
