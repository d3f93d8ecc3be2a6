-- lib_fence: the Redis clock, as every lock and semaphore script reads it,
-- and fencing tokens (K.fence: see lib_keys.lua). A library, not a script
-- on its own.

-- CLOCK.now is the Redis time in ms as clock last read it, CLOCK.us the
-- same in µs; CLOCK.t is TIME's answer then, and CLOCK.keys the KEYS of the
-- call that read it (see RECORDS below): a call that did not read the clock
-- does not take an earlier call's. The fencing token and the grant's time
-- take the numbers from here: a tonumber of TIME's text costs Redis about
-- 1 800 instructions, and a call would read it four times.
--
-- On the common path the scripts turn text into numbers, and round them,
-- with Lua's own arithmetic ('t[1] * 1000000', 'us - us % 1000'), not
-- with a call of its library (tonumber, math.floor): the same conversion,
-- without the call, which costs Redis about 1 000 instructions each
-- (clock's three: lock/history=0 about 247 600 -> 244 300).
local CLOCK = {now = 0, us = 0}

-- clock returns the Redis time in ms, and as TIME's {seconds, microseconds}.
local function clock()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  CLOCK.now, CLOCK.us = (us - us % 1000) / 1000, us
  CLOCK.t, CLOCK.keys = t, KEYS
  return CLOCK.now, t
end

-- time_us is TIME's answer t in µs: from clock's reading when t is it.
local function time_us(t)
  if CLOCK.t == t then
    return CLOCK.us
  end
  return t[1] * 1000000 + t[2]
end

-- A lock's name record, K.fence: one string per name, which outlives the
-- name's last grant (or the last event that began or extended a lease) by
-- the retention, so that a name that was released keeps one key (about
-- 240 bytes). Without a history (a semaphore's, a lock's with --history
-- 0) it is the last fencing token handed out, in digits, then, for a
-- lock, a space and until when the namespace's index lists the name (ms;
-- see x below). With one it is packed with cmsgpack: that token, the
-- lock's index, the note of its exclusive grant's lease (or false), until
-- when a gateway watches it (0: none; see watching.lua), how many events
-- it keeps, until when the namespace's index lists the name (x), and
-- those events (see lib_history.lua). A gateway that expects digits reads
-- the packed record as no counter, and takes the clock (see next_fence).
--
-- x, until when the namespace's index lists the name (lib_index.lua), is
-- at most what the index has: a script raises it only once the entry is
-- written (at once on a single Redis; on Cluster once the gateway has
-- written it, indexed.lua), and may lower it. So a grant whose lease ends
-- before x (less a margin) writes nothing to the index (index_keep).
--
-- With a history, a call reads the record once (record) and writes it once,
-- when its main part has run (flush_records, which once.lua calls, and
-- watch.lua, the one script with a history that once.lua does not wrap):
-- one GET and one SET for the fencing token, the note and every event of
-- the call.
-- RECORDS holds the records the running call read, by key; KEYS is new on
-- each call, which tells a call's records from those an earlier call
-- that failed left behind (a function library's locals outlive a call).
local RECORDS = {}

local COUNT_UNIT, CUT_UNIT = 4096, 16777216 -- see counts

-- parse_record reads the value v of a name record (nil: none) as record
-- returns it, but K.
local function parse_record(v)
  local rec = {n = 0, i = 0, note = false, w = 0, c = 0, b = 0, cb = 0, x = 0, evs = ''}
  local n, x = string.match(v or '', '^(%d+) ?(%d*)$')
  if n then
    -- the counter alone (a semaphore's, or a lock's without a history),
    -- and a lock's x
    rec.n, rec.x = tonumber(n), tonumber(x) or 0
  elseif v then
    local off, n, i, note, w, c, x = cmsgpack.unpack_limit(v, 6, 0)
    if type(x) == 'table' then -- a record of five fields: x is the first event
      off, x = cmsgpack.unpack_limit(v, 5, 0), 0
    end
    rec.n, rec.i, rec.note, rec.w, rec.x = tonumber(n) or 0, tonumber(i) or 0, note or false,
      tonumber(w) or 0, tonumber(x) or 0
    c = tonumber(c) or 0
    if c >= CUT_UNIT then
      rec.b = math.floor(c / CUT_UNIT) - 1
      c = c % CUT_UNIT
      rec.cb, rec.c = math.floor(c / COUNT_UNIT), c % COUNT_UNIT
    else
      -- The count alone, as gateways that do not keep the cut write it
      -- (before bd6b244): where the events were last cut is not known.
      rec.c, rec.b = c, -1
    end
    if off ~= -1 then
      rec.evs = string.sub(v, off + 1)
    end
  else
    rec.new = true
  end
  return rec
end

-- record_index returns the index of a name record's value v (false or
-- nil: none) as parse_record reads it, and with note, the note of its
-- exclusive grant's lease too (false for none), decoding nothing more: for
-- inspect.lua, which reads the record and writes nothing. A record of
-- digits (no history) has index 0.
local function record_index(v, note)
  if not v or string.match(v, '^%d+ ?%d*$') then
    return 0, false
  end
  local _, _, i, h = cmsgpack.unpack_limit(v, note and 3 or 2, 0)
  return tonumber(i) or 0, h or false
end

-- counts is the record's field of its events' counts, as parse_record
-- reads it: c, cb and b + 1 in one number (c and cb stay below
-- COUNT_UNIT, as --history is at most 1 000; b below 2^28, so the number
-- below 2^53), or c alone while b is not known. One number, not three
-- fields or a table: a table costs each call more than the cut saves, and
-- gateways that know only the count read this one as more events than
-- they keep, and cut them the way they know (they read a record of more
-- fields wrong).
local function counts(rec)
  if rec.b < 0 then
    return rec.c
  end
  return rec.c + COUNT_UNIT * rec.cb + CUT_UNIT * (rec.b + 1)
end

-- record returns K's name record as the running call has it: {K, n: the
-- last fencing token, i: the index, note: the packed note of the exclusive
-- grant's lease (lib_history.lua hold_note), false for none, w: ms until
-- which a gateway watches the lock (watching.lua), c: how many events it
-- keeps, b and cb: how many bytes and events at the end of evs were there
-- when they were last cut (b -1: not known; see push_events), x: until
-- when the namespace's index lists the name, evs: the
-- events, packed, newest first, pre: the events this call added, packed,
-- newest first, to go in front of evs (nil: none; see push_events), new:
-- true when the key did not exist, dirty: to be written, extend: to live
-- the retention from now}.
local function record(K)
  if RECORDS.keys ~= KEYS then
    RECORDS = {keys = KEYS, list = {}}
  end
  local rec = RECORDS[K.fence]
  if rec then
    return rec
  end
  rec = parse_record(redis.call('GET', K.fence))
  rec.K = K
  RECORDS[K.fence] = rec
  RECORDS.list[#RECORDS.list + 1] = rec
  return rec
end

-- flush_records writes every record the running call changed: one SET
-- each, which moves its expiry only when the call began or extended a
-- lease (or made the key): the retention from now.
local function flush_records()
  if RECORDS.keys ~= KEYS then
    return
  end
  for _, rec in ipairs(RECORDS.list) do
    if rec.dirty then
      local v = cmsgpack.pack(rec.n, rec.i, rec.note, rec.w, counts(rec), rec.x) .. (rec.pre or '') .. rec.evs
      if rec.extend or rec.new then
        redis.call('SET', rec.K.fence, v, 'PX', rec.K.keep_px)
      else
        redis.call('SET', rec.K.fence, v, 'KEEPTTL')
      end
    end
  end
  RECORDS = {}
end
AFTER_MAIN[#AFTER_MAIN + 1] = flush_records

-- next_fence returns a fencing token larger than every one handed out
-- before, as a string and as a number: the larger of the counter plus one and the Redis
-- clock in microseconds. The counter covers many grants within one
-- microsecond and a clock that steps back; the clock covers a counter that
-- is missing or behind: evicted, flushed, restored from stale persistence,
-- or on a replica promoted before it received the last grants. The clock
-- half holds as long as the clock of the Redis that grants is not behind the
-- clock of the one that granted before by more than the time between their
-- grants. Microseconds since 1970 stay below 2^53 until the year 2255, so
-- Lua's doubles hold them exactly.
--
-- Without a history, one SET ... GET writes the clock and reads the
-- counter; only when the counter is not behind the clock (many grants in
-- one microsecond, or a clock that stepped back) does a second SET put the
-- counter plus one. With one, the record (read once a call) takes it.
--
-- A lock's record without a history also carries x, which the SET writes
-- before it reads the old one: so it writes the stamp, index_until of
-- now, the same for every grant of an index period, and when the old x
-- was less (the period's first grant, or a record that was lost), makes
-- the index list the name until the stamp: at once on a single Redis; on
-- Cluster it puts the old x back (the gateway writes the entry once the
-- grant is answered, see index_keep), as x never says more than the index
-- has. K.ix is then the record's x, for index_keep.
local function next_fence(K, t, retention)
  local us = time_us(t)
  if K.hist_n and K.hist_n > 0 then
    local rec = record(K)
    rec.n = math.max(rec.n + 1, us)
    rec.dirty, rec.extend = true, true
    return string.format('%d', rec.n), rec.n
  end
  local fence = string.format('%d', us)
  if K.index == nil then -- a semaphore: no index, the counter alone
    local last = redis.call('SET', K.fence, fence, 'PX', retention, 'GET')
    last = last and tonumber(string.match(last, '^%d+')) or 0
    if last >= us then
      us = last + 1
      fence = string.format('%d', us)
      redis.call('SET', K.fence, fence, 'PX', retention)
    end
    return fence, us
  end
  local now = (us - us % 1000) / 1000
  local stamp, text = index_stamp(K, now)
  local last = redis.call('SET', K.fence, fence .. text, 'PX', retention, 'GET')
  local n, x = 0, 0
  if last then
    if string.find(last, text, -#text, true) then
      -- The usual record: the counter, then this period's stamp, found in
      -- place. The counter is compared as text (digits of one length
      -- compare as their numbers do): a number is made of it only when it
      -- is not below us, which a clock that did not go back makes rare.
      x = stamp
      local old = string.sub(last, 1, #last - #text)
      if #old > #fence or (#old == #fence and old >= fence) then
        n = tonumber(old) or 0
      end
    else
      n = tonumber(string.match(last, '^%d+')) or 0
      x = tonumber(string.match(last, '^%d+ (%d+)$')) or 0
    end
  end
  local again = n >= us
  if again then
    us = n + 1
    fence = string.format('%d', us)
  end
  K.ix = stamp
  if x < stamp then
    if K.index then
      index_write(K, now, stamp)
    else
      K.ix, again = x, true
    end
  end
  if again then
    redis.call('SET', K.fence, fence .. ' ' .. string.format('%d', K.ix), 'PX', retention)
  end
  return fence, us
end

-- note_indexed makes K's name record say that the namespace's index
-- lists the name until x (ms), unless it says so until later already: for
-- a record that this call does not keep in RECORDS (a lock without a
-- history, or indexed.lua's), whatever its form. A record that is gone
-- begins again as '0 x', living keep_px ms, as next_fence reads it.
local function note_indexed(K, x, keep_px)
  local v = redis.call('GET', K.fence)
  local n, old = string.match(v or '', '^(%d+) ?(%d*)$')
  if n then
    if (tonumber(old) or 0) < x then
      redis.call('SET', K.fence, n .. ' ' .. string.format('%d', x), 'KEEPTTL')
    end
  elseif v then
    local rec = parse_record(v)
    if rec.x < x then
      v = cmsgpack.pack(rec.n, rec.i, rec.note, rec.w, counts(rec), x) .. rec.evs
      redis.call('SET', K.fence, v, 'KEEPTTL')
    end
  else
    redis.call('SET', K.fence, '0 ' .. string.format('%d', x), 'PX', keep_px)
  end
end

-- index_keep makes the namespace's index list K's name until at least
-- its margin (INDEX_MARGIN_MS) after a lease that ends in left ms: every grant,
-- renewal, re-entry and pick-up that answers a lock's lease calls it. It
-- reads x (K.ix, when next_fence ran; the record, read once a call, with
-- a history; else one GET) and writes only when x is short: the entry
-- (lib_index.lua index_write), until index_until of the lease's end, and
-- on a single Redis x (on Cluster indexed.lua does, once the gateway has
-- written the entry).
local function index_keep(K, left)
  if K.index == nil then
    return -- a semaphore: no index
  end
  local now = CLOCK.now
  local need = now + left + index_period(K).m
  local rec = K.hist_n > 0 and record(K)
  local x = rec and rec.x or K.ix
  if not x then
    x = tonumber(string.match(redis.call('GET', K.fence) or '', '^%d+ (%d+)$')) or 0
    K.ix = x
  end
  if x >= need then
    return
  end
  local upto = index_until(K, need)
  index_write(K, now, upto)
  if K.index then
    K.ix = upto
    if rec then
      rec.x, rec.dirty = upto, true
    else
      note_indexed(K, upto, K.keep_px)
    end
  end
end

-- at_ms is TIME's {seconds, microseconds} as ms, a string.
local function at_ms(t)
  local us = time_us(t)
  return string.format('%d', (us - us % 1000) / 1000)
end
