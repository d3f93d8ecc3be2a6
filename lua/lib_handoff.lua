-- lib_handoff: the hand-off, which gives a lock that frees to the waiters
-- at the head of its queue (K.queue, see lib_keys.lua), and release_all,
-- which ends a hold and hands the lock on. The last of the lock libraries:
-- it uses all the others. A library, not a script on its own.

-- handoff gives the lock, when it is free or held shared, to the waiters
-- at the head of the queue: the first one still alive and, while the lock
-- is held shared, each shared one after it, up to the first that asks for
-- an exclusive hold (which waits, and blocks everyone behind it: writers
-- do not starve). holder is the lock's holder as current returned it, or
-- as the caller has changed it since. The caller (me) gets a full grant,
-- and so does an exclusive waiter on the caller's own gateway (here: the
-- channel of the gateway that runs this script, which learns of the grant
-- from the script's reply); its record and the lock delay are noted here,
-- as its own script would. Anyone else gets a provisional grant, with a
-- lease of at most its pick-up time, and its gateway is woken: a grant
-- nobody picks up, because the gateway died, froze or was cut off, ends
-- within that time and the queue moves on. A waiter whose gateway is known
-- to be gone is dropped. Returns {mine = me's reply (see fresh), if me got
-- the lock; near = the id of the waiter of here that got it in full, if
-- any, and near_reply its reply; holder = the lock's holder after}.
local function handoff(K, t, now, holder, retention, check_heard, me, here)
  local h = {}
  while true do
    if holder and holder ~= '' then
      break -- held exclusively
    end
    if not holder and delayed(K) then
      break
    end
    local id, e = first_alive(K, now)
    if id and not now then
      now, t = CLOCK.now, CLOCK.t -- first_alive read the clock
    end
    if not id or (holder and e.m ~= 's') or (holder == '' and shared_full(K)) then
      break -- the shared ones wait for a holder to leave
    end
    dequeue(K, id)
    local full = id == me or (here and e.g == here and e.m ~= 's' and e.k ~= 1) -- a ticket picks up by polling
    local lease = e.ttl
    if e.k == 1 then
      -- A ticket's grant waits its whole pick-up time, whatever TTL it
      -- asked for: the poll that picks it up gives it that TTL then.
      lease = e.l
    elseif not full then
      lease = math.min(tonumber(e.ttl), tonumber(e.l))
    end
    local fence, fence_n, _
    if e.m == 's' then
      fence, _, fence_n = add_reader(K, t, now, e.t, e.ttl, lease, e.s, e.o, retention, not full, e.cap)
      holder = ''
    else
      fence, _, fence_n = grant(K, t, e.t, e.ttl, lease, e.s, e.o, retention, not full, e.v, e.mh, e.cap)
      holder = e.t
    end
    event(K, id == me and 'acquired' or 'handed_over', now, e.s, e.o, fence, e.v)
    if id == me then
      h.mine = fresh(fence_n, e.ttl, now)
    elseif full then
      h.near, h.near_reply = id, fresh(fence_n, e.ttl, now)
      -- The record's key shares the lock's hash tag, so it is on this
      -- script's slot; it is not among KEYS, as the caller did not know
      -- whose grant this would be.
      note_grant(K, K.lock .. ':t:' .. e.t, tonumber(e.ttl))
    elseif not wake(e, id, check_heard) then -- its gateway is gone: the grant would sit unused
      if e.m == 's' then
        drop_reader(K, now, e.t)
        holder = redis.call('HGET', K.lock, 'tok')
      else
        redis.call('DEL', K.lock)
        drop_note(K)
        holder = nil
      end
      event(K, 'waiter_dropped', now, e.s, e.o, 0)
    end
  end
  h.holder = holder
  return h
end

-- lift_delay ends the lock delay of a lock that an end of its grants
-- freed (a release, a break): the holders said they are done, but for what
-- remains of one after a shared holder's lease that ended unreleased
-- ('x:<ms>').
local function lift_delay(K, now)
  if K.delay_ms == 0 then
    return
  end
  local d = redis.call('GET', K.delay)
  local until_ms = d and tonumber(string.match(d, '^x:(%d+)$'))
  if until_ms and until_ms > now then
    redis.call('SET', K.delay, d, 'PX', until_ms - now)
  else
    redis.call('DEL', K.delay)
  end
end

-- rest ends the exclusive grant of K.lock, released before mh (ms, its
-- min hold's end, a string), and keeps the lock from others until mh:
-- K.lock becomes {tok = RESTING, mh}, which lives until then, and which
-- every script takes for a lock held by another. Its head waiter is told
-- to look again: it waited for the lease, and now waits for mh, when it
-- takes the lock as it takes one whose lease ended. Returns true, or false
-- when mh has passed (the caller frees the lock as ever).
local function rest(K, now, mh)
  local left = tonumber(mh) - now
  if left <= 0 then
    return false
  end
  redis.call('DEL', K.lock)
  redis.call('HSET', K.lock, 'tok', RESTING, 'mh', mh)
  -- At mh itself, not left ms after the time Redis took when the script
  -- began: TIME (now) may read later than that (Redis descheduled in
  -- between, 12 ms in a CI run), and the name then came free that early.
  redis.call('PEXPIREAT', K.lock, mh)
  local id, e = first_alive(K, now)
  if id then
    wake(e, id, '0')
  end
  return true
end

-- release_fields reads the exclusive grant's fields that release_all
-- needs: {tok, at, hs, mh}, and with a history its subject, owner and
-- fence after them, for the event (each field read costs Redis about 1 500
-- instructions, and without a history nothing reads those three).
-- With more set (a field's name), its value comes last, at 8 with a
-- history, else at 5.
local function release_fields(K, more)
  if K.hist_n > 0 then
    if more then
      return redis.call('HMGET', K.lock, 'tok', 'at', 'hs', 'mh', 'sub', 'own', 'fence', more)
    end
    return redis.call('HMGET', K.lock, 'tok', 'at', 'hs', 'mh', 'sub', 'own', 'fence')
  elseif more then
    return redis.call('HMGET', K.lock, 'tok', 'at', 'hs', 'mh', more)
  end
  return redis.call('HMGET', K.lock, 'tok', 'at', 'hs', 'mh')
end

-- release_all ends the caller's hold (the exclusive grant, or its shared
-- hold r), notes it, and hands the lock on (see handoff for here). f is
-- the exclusive grant's release_fields, if the caller has read them
-- already; a grant whose min hold lasts rests (see rest) instead of
-- freeing the lock. now and t are the clock as the caller read it, or nil
-- when it did not: the usual release (an exclusive grant without a min
-- hold, a history or a lock delay, that nobody waits for) needs no clock,
-- and reads none. Returns when the hold was made (ms on Redis's clock, as
-- text), and the near id and reply handoff returns. When the lock is free
-- then, the lock delay ends, but for what remains of one after a shared
-- holder's lease that ended unreleased ('x:<ms>').
local function release_all(K, t, now, tok, r, f, retention, check_heard, here)
  f = not r and (f or release_fields(K))
  if not now and (r or K.hist_n > 0 or K.delay_ms > 0 or f[4]) then
    now, t = clock()
  end
  local at, holder
  -- The release and the hand-off that follows it (a grant, waiters
  -- dropped) go into the history together, with one LPUSH.
  if K.hist_n > 0 then
    K.ev = {}
  end
  if r then
    at = r.a
    event(K, 'released', now, r.s, r.o, r.f, nil, nil, K.session)
    drop_reader(K, now, tok)
    holder = redis.call('HGET', K.lock, 'tok')
  else
    at = f[2]
    event(K, 'released', now, f[5], f[6], f[7], nil, nil, K.session)
    if f[4] and rest(K, now, f[4]) then
      holder = RESTING
    else
      redis.call('DEL', K.lock)
    end
    drop_note(K)
  end
  at = at or '0'
  released(K, at)
  if not holder then
    lift_delay(K, now)
  end
  local h = handoff(K, t, now, holder, retention, check_heard, nil, here)
  local ev = K.ev
  K.ev = nil
  if ev and #ev > 0 then
    push_events(K, ev, K.ev_extends)
  end
  return at, h.near, h.near_reply
end
