-- lib_grant: exclusive grants (K.lock, see lib_keys.lua): making one,
-- noting it (its record, the lock delay, the index's entry of its name), picking up one handed
-- over, the replies that tell of one, and current, which every lock script
-- that writes starts with. A library, not a script on its own.

-- note_grant notes a full grant with left ms of lease, whose record is
-- the key record: the record ('h', handed: '1' when the call picked up
-- a grant handed over before, else '0', ':' and the id of that call, see
-- acquire.lua), and with a lock delay, that the lock stays
-- unavailable until the delay after the lease unless released.
local function note_grant(K, record, left, handed)
  -- Numbers made text with string.format: Lua's own conversion, for a
  -- concatenation or a command's argument, costs Redis about twice as much.
  redis.call('SET', record, (handed == 1 and 'h1:' or 'h0:') .. CALL_ID, 'PX', string.format('%d', left + RECORD_MS))
  index_keep(K, left)
  if K.delay_ms > 0 and redis.call('PTTL', K.delay) < left + K.delay_ms then
    -- At a time on the clock the lease was answered on, not relative to
    -- when this command runs: a script that the machine paused between
    -- its TIME and here would make the delay outlast the lease's end by
    -- the pause (an inspect then answered 803 ms of an 800 ms delay).
    local now = CLOCK.keys == KEYS and CLOCK.now or clock()
    redis.call('SET', K.delay, redis.call('GET', K.delay) or 'g', 'PXAT', string.format('%d', now + left + K.delay_ms))
  end
end

-- member_released marks the member of a session's grant released ('g'),
-- sm naming it as session_acquire.lua wrote it ('<field> <hold> <session
-- key>'; false or nil: none), so that the next keep-alive lists it gone
-- and renews nothing, where it would renew it, be refused, and drop it in
-- one call more. Only while the session still has the member: a session
-- gone has no hash to write to, and one HSET would make it anew, with no
-- lease. HSET says whether the field was new: the member the session has
-- (the usual case) is marked in one command, where an HEXISTS before it
-- made two; a field it made (the session ended, or gone) is taken back at
-- once, and with it the hash, if HSET made that too.
local function member_released(sm)
  if not sm then
    return
  end
  local field, hold, session = string.match(sm, '^(%S+) (%S+) (.*)$')
  if redis.call('HSET', session, field, 'g' .. hold) == 1 then
    redis.call('HDEL', session, field)
  end
end

-- settle notes a grant the caller gets, whose reply is rp (see held_by),
-- and returns rp. A grant being broken with a period (breaking, see
-- break.lua) keeps its record saying 'b' and moves no lock delay: at the
-- period's end the grant ends broken, and the lock is the next holder's.
local function settle(K, rp, breaking)
  if breaking then
    redis.call('SET', K.record, 'b', 'PX', rp[3] + RECORD_MS)
    index_keep(K, rp[3])
    return rp
  end
  note_grant(K, K.record, rp[3], rp[6])
  return rp
end

-- keep_idem keeps the idempotency record ik of a grant (see
-- idem_lib.lua), if it has one, until IDEM_GRACE_MS (protocol.lua) after
-- a lease of ms.
local function keep_idem(ik, ms)
  if ik then
    redis.call('PEXPIRE', ik, tonumber(ms) + IDEM_GRACE_MS)
  end
end

-- grant makes the free lock held by the token hash tok with a lease of
-- lease ms, and returns the new fencing token and when it was acquired (ms),
-- both strings, and the fencing token as a number (for fresh). ttl is the lease asked for: what a pick-up, or a renew
-- without a TTL, gives. A provisional grant is one handed to a waiter that
-- has not picked it up yet. value is the grant's value (nil or '': none),
-- which lives in K.lock and so ends with the grant. min_hold (ms, nil or
-- 0: none) keeps the lock from others until that long after now, even
-- once released (see rest). max_hold, ms (nil: none), is the grant's hard
-- cap: K.lock's 'cap' says until when (acquired at plus max_hold), which
-- no lease passes; at least ttl and min_hold, so that the first lease
-- needs no cut. A free lock has no hash to clear: every script writes to
-- K.lock only after finding it held (tok set), or here.
--
-- sm, when set, is the grant's session member, as session_acquire.lua
-- names it (see member_released): written with the other fields, one HSET
-- where the session's acquire made two.
local function grant(K, t, tok, ttl, lease, sub, own, retention, provisional, value, min_hold, max_hold, sm)
  local fence, fence_n = next_fence(K, t, retention)
  local at = at_ms(t)
  if sm then
    redis.call('HSET', K.lock, 'tok', tok, 'fence', fence,
      'sub', sub, 'own', own, 'at', at, 'ttl', ttl, 'sm', sm)
  else
    redis.call('HSET', K.lock, 'tok', tok, 'fence', fence,
      'sub', sub, 'own', own, 'at', at, 'ttl', ttl)
  end
  if provisional then
    redis.call('HSET', K.lock, 'p', '1')
  end
  if value and value ~= '' then
    redis.call('HSET', K.lock, 'v', value)
  end
  if min_hold and tonumber(min_hold) > 0 then
    redis.call('HSET', K.lock, 'mh', tonumber(at) + tonumber(min_hold))
  end
  local cap
  if max_hold and max_hold ~= '' then
    cap = tonumber(at) + tonumber(max_hold)
    redis.call('HSET', K.lock, 'cap', string.format('%d', cap))
  end
  redis.call('PEXPIRE', K.lock, lease)
  if K.hist_n > 0 then
    hold_note(K, tonumber(at) + tonumber(lease), {fence, sub, own}, nil, cap)
  end
  return fence, at, fence_n
end

-- fresh is the reply of a grant made now, at now ms, with fencing token
-- fence_n (a number; see held_by): it reports the TTL it was given, for
-- PTTL may read a millisecond short, as Redis's clock moves during a
-- script.
local function fresh(fence_n, ttl, now)
  return {1, fence_n, tonumber(ttl), now, now, 0}
end

-- granted_now notes a grant or permit made now, at fence_n, with the TTL
-- asked for (settle), and returns the acquire's reply: its bare fencing
-- token, the usual reply, and so the cheapest (a table of six costs Redis
-- about 6 000 instructions more than a number), built without the table
-- (fresh) it stands for. In the library of session_acquire.lua, whose
-- lease the session cuts to what is left of its own, so that the gateway
-- does not know it (lua.go inSession sets BARE_GRANT false there: each
-- script is a library of its own), {GRANTED, fencing token, ttl}. And
-- fresh's table itself for a lock on Cluster (K.index false), to which
-- the index's entries due are appended (lib_index.lua index_trailer; a
-- semaphore has no index).
local BARE_GRANT = true
local function granted_now(K, fence_n, ttl, now)
  if K.index == false then
    return settle(K, fresh(fence_n, ttl, now))
  end
  ttl = ttl + 0
  note_grant(K, K.record, ttl, 0)
  if BARE_GRANT then
    return fence_n
  end
  return {GRANTED, fence_n, ttl}
end

-- SESSION_MEMBER is, while session_acquire.lua runs acquire.lua's (or
-- sem_acquire.lua's) body, the session member its grant names ('sm', see
-- member_released), which the body's own grant writes with its other
-- fields (grant, add_reader, add_holder): nil in every other call, and in
-- every other script's library. session_member hands it to that grant,
-- once, and leaves false: written.
local SESSION_MEMBER
local function session_member()
  local sm = SESSION_MEMBER
  if sm then
    SESSION_MEMBER = false
  end
  return sm
end

-- pick_up makes a provisional grant a full one: its lease becomes the TTL
-- asked for, from now, up to its hard cap (see grant).
local function pick_up(K, now)
  if redis.call('HDEL', K.lock, 'p') == 1 then
    local g = redis.call('HMGET', K.lock, 'ttl', 'cap')
    local ttl = capped(g[1], g[2], now)
    redis.call('PEXPIRE', K.lock, ttl)
    hold_note(K, now + ttl, holder_of(K), nil, g[2])
  end
end

-- held_by returns the reply of the exclusive grant the caller held before
-- this script ran (a retried call, or a hand-off picked up now):
-- {1, fencing token, ttl ms, now ms, acquired at ms, 1}; fresh is the reply
-- of a grant made now, with 0 at its end.
local function held_by(K, now)
  local f = redis.call('HMGET', K.lock, 'fence', 'at')
  return {1, tonumber(f[1]), redis.call('PTTL', K.lock), now, tonumber(f[2]), 1}
end

-- current returns the lock's holder, as the field tok: nil when the lock
-- is free, '' when it is held shared, else the exclusive holder's token
-- hash. Every lock script that writes starts with it (but a release by
-- the exclusive holder, which needs neither of its checks). Unless the
-- lock is held exclusively, it first records an exclusive lease that ended
-- unreleased (check_expired) and drops the shared holds that ended
-- (purge_ended): a live exclusive grant has neither, for the lease note is
-- its own, and no shared hold lives beside it (K.readers lives and dies
-- with K.lock).
local function current(K, now)
  local tok = redis.call('HGET', K.lock, 'tok')
  if tok and tok ~= '' then
    return tok
  end
  check_expired(K, now)
  if tok == '' and purge_ended(K, now) then
    tok = redis.call('HGET', K.lock, 'tok')
  end
  return tok
end
