-- lib_history: a lock's history of events (K.history, with --history) and
-- the note of its exclusive grant's lease end (K.held), from which the
-- first script to run after that lease ended unreleased records that it
-- expired (see lib_keys.lua). A library, not a script on its own.

-- push_events adds the events evs (tables, see event), oldest first, to
-- the lock's history: one LPUSH, then the cap. Each event gets its number
-- i, one more than the one before it (the head's, read with one LINDEX):
-- the lock's index, which watches resume from. The history lives
-- K.keep_ms after the last event that began or extended a lease (extends),
-- and a new one gets that expiry whatever its first event: an event that
-- ends a lease or drops a waiter comes within one lease of such an event,
-- so it need not move the expiry, which saves a PEXPIRE per release.
-- Then each gateway that watches the lock (K.lock .. ':w', see lib_keys.lua)
-- hears one hint with the new index: "read again", nothing more.
local function push_events(K, evs, extends)
  local head = redis.call('LINDEX', K.history, '0')
  local i = tonumber(head and string.match(head, '"i":"(%d+)"')) or 0
  local enc = {}
  for n, ev in ipairs(evs) do
    ev.i = string.format('%d', i + n)
    enc[n] = cjson.encode(ev)
  end
  local n = redis.call('LPUSH', K.history, unpack(enc))
  if n > K.hist_n then
    redis.call('LTRIM', K.history, '0', K.hist_last)
  end
  if extends or n == #evs then
    redis.call('PEXPIRE', K.history, K.keep_px)
  end
  local hint = WATCH_HINT .. ' ' .. K.lock .. ' ' .. string.format('%d', i + #evs)
  for _, g in ipairs(redis.call('ZRANGE', K.lock .. ':w', '0', '-1')) do
    redis.call('PUBLISH', g, hint)
  end
end

-- The events that leave the history's expiry where it is (see
-- push_events).
local ENDS = {released = true, expired = true, broken = true, waiter_dropped = true}

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
  local ev = {e = what, t = string.format('%d', ms), s = sub, o = own,
    f = string.format('%d', tonumber(fence) or 0), b = by}
  if session and session ~= '' then
    ev.ss = session
  end
  if value and value ~= '' then
    ev.v = value
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
-- at until ms, for check_expired; nothing without a history. by, for a
-- grant being broken with a period (break.lua), is who breaks it.
local function hold_note(K, until_ms, f, by)
  if K.hist_n == 0 then
    return
  end
  redis.call('SET', K.held, cjson.encode({f = f[1], s = f[2], o = f[3], u = string.format('%d', until_ms), b = by}),
    'PX', K.keep_px)
end

-- check_expired records, once, that the noted exclusive grant's lease
-- ended unreleased: at its end, whichever script runs first after it. A
-- grant whose break period ended it was broken, by the noted breaker.
local function check_expired(K, now)
  if K.hist_n == 0 then
    return
  end
  local h = redis.call('GET', K.held)
  if h then
    h = cjson.decode(h)
    if tonumber(h.u) <= now then
      redis.call('DEL', K.held)
      if h.b then
        event(K, 'broken', tonumber(h.u), h.s, h.o, h.f, nil, h.b)
      else
        event(K, 'expired', tonumber(h.u), h.s, h.o, h.f)
      end
    end
  end
end
