-- lib_history: a lock's history of events and the note of its exclusive
-- grant's lease end, from which the first script to run after that lease
-- ended unreleased records that it expired; both in the lock's name record
-- (K.fence, with --history: see lib_fence.lua and lib_keys.lua). A
-- library, not a script on its own.

-- An event's fields, in the order the record keeps them (see event), by
-- the names history.lua and watch.lua give them (event_json).
local EVENT_FIELDS = {'e', 't', 'f', 's', 'o', 'v', 'b', 'ss'}

-- EVENT_KINDS are the events' kinds (locks.EventKinds, in its order: a new
-- one goes at the end of both), which the record
-- packs as their number here; KIND_CODES the reverse.
local EVENT_KINDS = {'acquired', 'handed_over', 're_entered', 'renewed', 'released', 'expired', 'broken',
  'waiter_dropped', 'value_changed', 'max_hold'}
local KIND_CODES = {}
for code = 1, #EVENT_KINDS do -- a library's top level has no ipairs
  KIND_CODES[EVENT_KINDS[code]] = code
end

-- event_json is the packed event a, numbered i, as JSON whose numbers are
-- strings (cjson keeps 14 digits of a number, a fencing token has 16).
local function event_json(a, i)
  local ev = {i = string.format('%d', i), e = EVENT_KINDS[a[1]]}
  for k = 2, #EVENT_FIELDS do
    local f = EVENT_FIELDS[k]
    local v = a[k]
    if v then
      if type(v) == 'number' then
        v = string.format('%d', v)
      end
      ev[f] = v
    end
  end
  return cjson.encode(ev)
end

-- history_of returns the newest max events of the name record rec (see
-- lib_fence.lua record) as JSON (event_json), newest first: what
-- history.lua and watch.lua answer; and whether the oldest of them is the
-- first event of the record's history (see push_events), or there are
-- none, so that a watcher that has seen none of its events missed none.
local function history_of(rec, max)
  local out = {}
  if rec.pre then
    rec.evs, rec.pre = rec.pre .. rec.evs, nil
  end
  if rec.evs == '' then
    return out, true
  end
  local evs = {cmsgpack.unpack_limit(rec.evs, max, 0)}
  for k = 2, #evs do
    out[k - 1] = event_json(evs[k], rec.i - k + 2)
  end
  -- A history begun before the index started from the clock numbered its
  -- first event 1, and marked none.
  local oldest = rec.i - #evs + 2
  return out, evs[#evs][9] == true or oldest == 1
end

-- push_events adds the events evs (tables, see event), oldest first, to
-- the lock's history in its name record (lib_fence.lua record), and keeps
-- its last K.hist_n: when it holds twice as many, it drops all but those.
-- The events are packed one after the other, so that finding where the
-- last K.hist_n end means decoding them: once every K.hist_n events, not
-- at each. Each event gets its number, one more than the one
-- before it: the lock's index, which watches resume from. A history
-- begins (the record has no index yet: it is new, or it was lost, expired
-- or flushed, since) at the Redis clock in microseconds, as a fencing token
-- does (lib_fence.lua next_fence), and marks its first event: so an index
-- never repeats (as long as a lock's events came fewer than one per
-- microsecond on average, and the clock did not step back), and a watcher
-- that has an index of an earlier history learns that it missed events
-- (locks.ChangeAfter), where it would have taken the new events for those
-- it saw. Microseconds since 1970 stay below 2^53 (Lua's doubles, and
-- JavaScript's numbers) until the year 2255. The record lives
-- the retention after the last event that began or extended a lease
-- (extends), and a new one gets that expiry whatever its first event: an
-- event that ends a lease or drops a waiter comes within one lease of such
-- an event, so it need not move the expiry. Then each gateway that watches
-- the lock (K.lock .. ':w', see lib_keys.lua, while the record says one
-- does) hears one hint with the new index: "read again", nothing more.
local function push_events(K, evs, extends)
  local rec = record(K)
  if rec.i == 0 then
    local t = CLOCK.keys == KEYS and CLOCK.t or redis.call('TIME')
    rec.i = t[1] * 1000000 + t[2]
    local first = evs[1]
    for k = 4, 8 do
      if first[k] == nil then
        first[k] = false
      end
    end
    first[9] = true -- the history's first event (see history_of)
  end
  -- One event, what most calls add, needs no table to join.
  local new
  if #evs == 1 then
    new = cmsgpack.pack(evs[1])
  else
    local packed = {}
    for n = #evs, 1, -1 do
      packed[#evs - n + 1] = cmsgpack.pack(evs[n])
    end
    new = table.concat(packed)
  end
  -- The new events wait in front of the old ones (rec.pre) until the
  -- record is written, and are joined to them there, in the one
  -- concatenation that writes the head too: the old events, a few
  -- hundred bytes, are copied once less a call (lock/history=10 445 753 ->
  -- 434 865 Redis instructions a cycle).
  rec.pre, rec.c = new .. (rec.pre or ''), rec.c + #evs
  if rec.b >= 0 and rec.c - rec.cb >= K.hist_n then
    -- The events that came since the last cut, K.hist_n or more, are all
    -- the record keeps: the bytes in front of the b that were there then.
    -- Finding where they end takes no decoding (which cost lock/history=10
    -- about 25 000 Redis instructions a cycle).
    local keep = #rec.pre + #rec.evs - rec.b
    if rec.b > 0 then
      if keep <= #rec.pre then
        rec.evs = string.sub(rec.pre, 1, keep)
      else
        rec.evs = rec.pre .. string.sub(rec.evs, 1, keep - #rec.pre)
      end
      rec.pre = nil
    end
    rec.c = rec.c - rec.cb
    rec.b, rec.cb = keep, rec.c
  elseif rec.c > 2 * K.hist_n then
    -- Where the last cut was is not known (a record an older gateway
    -- wrote): the newest K.hist_n are found by decoding them.
    rec.evs, rec.pre = rec.pre .. rec.evs, nil
    local off = cmsgpack.unpack_limit(rec.evs, K.hist_n, 0)
    if off ~= -1 then
      rec.evs = string.sub(rec.evs, 1, off)
    end
    rec.c = K.hist_n
    rec.b, rec.cb = #rec.evs, rec.c
  end
  rec.i = rec.i + #evs
  rec.dirty = true
  rec.extend = rec.extend or extends
  if CLOCK.now and rec.w < CLOCK.now then
    return -- nobody watches: the registry is not read
  end
  local hint = WATCH_HINT .. ' ' .. K.lock .. ' ' .. string.format('%d', rec.i)
  for _, g in ipairs(redis.call('ZRANGE', K.lock .. ':w', '0', '-1')) do
    redis.call('PUBLISH', g, hint)
  end
end

-- The events that leave the history's expiry where it is (see
-- push_events).
local ENDS = {released = true, expired = true, broken = true, waiter_dropped = true, max_hold = true}

-- event adds an event to the lock's history (when it keeps one: never for
-- a semaphore's S): what happened at ms on the Redis clock, to the grant
-- of subject and owner label with fencing token fence (0 for a waiter),
-- the grant's value, if the event sets one (acquired, handed_over,
-- value_changed), by, for a grant someone else ended (broken), who did,
-- and session, for a release by the end of a session, that session's id.
-- While K.ev is a list (see release_all), the event waits there, to be
-- pushed with the others.
local function event(K, what, ms, sub, own, fence, value, by, session)
  if not K.hist_n or K.hist_n == 0 then
    return
  end
  -- As the record keeps it: {kind, ms, fencing token, subject, owner},
  -- and, only when it has one of them, the value, who broke it and the
  -- session (false for those it lacks): about 30 bytes packed, for an
  -- acquire, where its JSON took 90.
  local ev = {KIND_CODES[what], tonumber(ms), tonumber(fence) or 0, sub, own}
  value = value ~= '' and value
  session = session ~= '' and session
  if value or by or session then
    ev[6], ev[7], ev[8] = value or false, by or false, session or false
  end
  if K.ev then
    K.ev[#K.ev + 1] = ev
    K.ev_extends = K.ev_extends or not ENDS[what]
  else
    push_events(K, {ev}, not ENDS[what])
  end
end

-- holder_of returns the exclusive grant's {fence, subject, owner}.
local function holder_of(K)
  return redis.call('HMGET', K.lock, 'fence', 'sub', 'own')
end

-- hold_note notes the exclusive grant f (see holder_of), whose lease ends
-- at until ms, in the name record, for check_expired; nothing without a
-- history. by, for a grant being broken with a period (break.lua), is who
-- breaks it; cap, for a grant with a hard cap (K.lock's 'cap', see
-- lib_grant.lua), when the cap ends it, ms: given by the grant, and
-- carried on from the grant's earlier note by the scripts that extend its
-- lease. The note is {lease end, fencing token, subject, owner, by[, cap]},
-- and as it begins or extends a lease, the record lives the retention from
-- now.
local function hold_note(K, until_ms, f, by, cap)
  if K.hist_n == 0 then
    return
  end
  local rec = record(K)
  local fence, old = tonumber(f[1]), rec.note
  cap = cap or (old and old[2] == fence and old[6])
  if cap then
    rec.note = {tonumber(until_ms), fence, f[2], f[3], by or false, tonumber(cap)}
  else
    rec.note = {tonumber(until_ms), fence, f[2], f[3], by}
  end
  rec.dirty, rec.extend = true, true
end

-- drop_note ends the note of the exclusive grant, which ended (released,
-- broken, or dropped with its waiter).
local function drop_note(K)
  if K.hist_n == 0 then
    return
  end
  local rec = record(K)
  if rec.note then
    rec.note, rec.dirty = false, true
  end
end

-- check_expired records, once, that the noted exclusive grant's lease
-- ended unreleased: at its end, whichever script runs first after it. A
-- grant whose break period ended it was broken, by the noted breaker; one
-- whose lease reached its hard cap ended max_hold.
local function check_expired(K, now)
  if K.hist_n == 0 then
    return
  end
  local h = record(K).note
  if h and h[1] <= now then
    drop_note(K)
    if h[5] then
      event(K, 'broken', h[1], h[3], h[4], h[2], nil, h[5])
    elseif h[6] and h[1] >= h[6] then
      event(K, 'max_hold', h[1], h[3], h[4], h[2])
    else
      event(K, 'expired', h[1], h[3], h[4], h[2])
    end
  end
end
