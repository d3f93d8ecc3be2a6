-- lib_keys: the Redis layout of a lock, and lock_keys, which names the
-- keys of a lock script's KEYS. The first of the libraries that lua.go puts
-- in front of the lock and semaphore scripts (in the order lua.go lists),
-- since Redis scripts cannot import; not a script on its own. This is the
-- one description of a lock's keys: the other libraries, the scripts and
-- the engine (locks) refer to it.
--
-- The keys of one lock, all with the hash tag {ns/name} (K below):
--   K.lock     hash: tok (SHA-256 of the owner token), fence, sub, own,
--              at (acquired, ms on the Redis clock), ttl (as asked for),
--              p ('1' while the grant is provisional: handed to a waiter
--              whose gateway has not picked it up yet), hs (the ids of its
--              holds, when it was re-entered: see holds.lua), v (the
--              grant's value, absent for none: it goes with the hash when
--              the grant ends), mh (with a min hold: ms on the Redis clock
--              until which the name stays from others, released or not),
--              cap (only for a grant with a hard cap: ms on the Redis
--              clock, at plus its max hold, which no lease passes; see
--              lib_grant.lua grant), sm (only for a session's grant
--              taken by session_acquire.lua: its session's key, a space
--              and its member's field, which its release drops); its
--              PEXPIRE is the lease. A grant
--              released before its mh leaves the hash {tok = RESTING, mh},
--              living until mh: held by no token, so that every script
--              sees the lock held by another until then (lib_grant.lua rest)
--   K.fence    the name record (lib_fence.lua), all a released name
--              keeps, living the retention after the last grant or event
--              that began or extended a lease. Without a history: the
--              last fencing token handed out, in digits, a space, and x
--              (below). With --history N:
--              packed with cmsgpack, that token; the lock's index (its
--              newest event's number); the note of the exclusive grant's
--              lease, {ms when it ends, fencing token, subject, owner
--              label, who breaks it, when a break period ends it} (false
--              for none), from which the first script to run after that
--              lease ended unreleased records that it expired; until when
--              a gateway watches the lock (ms, 0: none; watching.lua), so
--              that a script that records an event reads the registry
--              (K.lock .. ':w') only then; how many events it keeps; x;
--              and its last N to 2N events, newest first, each an array
--              {event kind (its place in EVENT_KINDS), ms on the Redis
--              clock, fencing token, subject, owner label, and only on
--              the events that have one: value, who broke it, the session
--              whose end released it (lib_session.lua)} (see
--              lib_history.lua event). x is until when the namespace's
--              index lists the name (ms; never later than the index
--              has it), which lets a grant whose lease ends before then
--              write nothing to the index (lib_index.lua)
--   K.queue    zset: waiter id -> arrival number: the Redis clock in ms at
--              its arrival less its priority's head start (serving order:
--              by priority, aged, then FIFO; lib_queue.lua enqueue)
--   K.alive    zset: waiter id -> ms until which the waiter counts as alive
--   K.waiters  hash: waiter id -> JSON {g: its gateway's channel, t: token
--              hash, ttl, l: how long a grant handed to it waits for its
--              pick-up (ms), s: subject, o: owner label, d: wait deadline
--              ms, m: 's' when it asks for a shared hold, v: the value
--              its grant will carry, absent for none, mh: its min hold,
--              ms, absent for none, cap: its max hold, ms, absent for
--              none, pr: the priority it asked for, 1 to 9, absent for
--              0}; field '#seq' is the last arrival number drawn, before
--              any head start (strictly increasing per lock)
--   K.readers  zset: token hash of a shared holder -> ms on the Redis clock
--              when its lease ends
--   K.delay    string, with --lock-delay: while it exists, a lock nobody
--              holds is not free, for a holder whose lease ended without a
--              release may still be at work; 'g' as a grant sets it (until
--              the delay after its lease), 'x:<ms>' once a shared holder's
--              lease was seen to end unreleased: the delay after that lasts
--              until ms on the Redis clock, whoever releases
--   K.record   string, K.lock .. ':t:' .. token hash, one per owner token
--              (so the key of the caller's token, among KEYS; absent for
--              scripts without one): 'h<handed>:<call id>' while the
--              grant may be held, until RECORD_MS after its lease
--              (renewals push that on), naming the call that made (handed
--              0) or picked up (1) the grant;
--              'r<made at, ms>:<call id>' for RECORD_MS after its release,
--              by that call; 'b' for RECORD_MS after a break ended it
--              (break.lua); 'f' for RECORD_MS after its wait ended without
--              a grant (leave.lua). A call whose token holds nothing
--              learns why from it (lib_record.lua), and a call delivered
--              again finds its own effect in it, so that the acquire and
--              the release keep no call record (lua.go Keyed)
--
-- A lock held shared has tok = '' in K.lock, which no token hash matches
-- (so scripts that know only exclusive holders see it as held by another),
-- and one field 'r:<token hash>' per shared holder: JSON {f: fencing
-- token, s, o, a: acquired at ms, t: ttl asked for, p: 1 while provisional,
-- hs: its hold ids when re-entered (holds.lua), cap: its hard cap, as K.lock's
-- (absent for none), sm: its session's member, as K.lock's 'sm', for a
-- shared grant that session_acquire.lua made}. K.lock and K.readers
-- then live as long as the longest shared lease, and every script first
-- drops the shared holders whose lease has ended (lib_shared.lua
-- purge_ended).
--
-- Beside them, under the same hash tag: K.lock .. ':c:' .. call id, the
-- reply of one call (once.lua), K.lock .. ':idem:' .. id, an
-- idempotency record (idem_lib.lua), and K.lock .. ':w', while a gateway
-- watches the lock: zset, gateway channel -> ms until which it watches
-- (watching.lua), whom push_events sends its hint (lib_history.lua). Elsewhere: a semaphore's keys
-- (semlib.lua), a namespace's index of lock names, a directory prefix ..
-- 'names:{ns}' of packed buckets, that .. ':' .. the bucket's first name,
-- of entries 'name until' (one per name, about 35 bytes; lib_index.lua),
-- written when a name is new to it or a lease would outlast its entry,
-- not by every grant, and never by a release (lib_index.lua, index.lua,
-- list.lua), one pub/sub channel per
-- gateway process, the prefix ..
-- 'gateway:' .. id (lib_queue.lua wake), and a session's record, whose
-- grants are ordinary grants of their locks (lib_session.lua).
--
-- The rule the scripts keep: only a script decides who holds what. A
-- hand-off message says "look again" and nothing else; the waiter's own
-- acquire script then finds, and picks up, what was handed to it.

-- OPTIONS are the lock options (see lock_keys) as parsed, by their text,
-- and OPTIONS_N how many. A function library's top-level locals outlive a
-- call, so a gateway's options, the same in every call, are parsed once
-- per library and not once per call (a tonumber costs about half a
-- microsecond in Redis's Lua); the gateways of one Redis send a few texts.
-- The number that goes to Redis commands is kept as text too (keep_px):
-- Redis turns a number argument into text with snprintf, which
-- costs as much as the tonumber.
local OPTIONS, OPTIONS_N = {}, 0

-- RESTING is K.lock's tok while a released grant's min hold keeps the
-- lock from others: no token hash (hex) nor '' (shared) is it.
local RESTING = '-'

-- LOCK_NAMES_MAX bounds how many locks' names a library keeps, over all
-- options texts (lock_keys_at), and LOCK_NAMES_N counts them: past it,
-- every text's table starts again. Each costs the library's Lua about
-- 1.5 KB (measured: used_memory_vm_functions), so the lock libraries keep
-- at most about 4.6 MB between them, outside maxmemory.
local LOCK_NAMES_MAX, LOCK_NAMES_N = 256, 0

-- lock_keys_at is lock_keys for a script that takes several locks (a
-- lock set, see set_acquire.lua): the two keys of one lock start after
-- KEYS[base].
--
-- A call passes a lock's key and its caller's record, and the script names
-- the lock's other keys from the first: each key Redis takes as an
-- argument costs it more (about 1 400 instructions: parsed, then pushed
-- into KEYS) than a concatenation in Lua, and most calls touch few of
-- them. All of them share the lock's hash tag, so they are on the slot of
-- KEYS[1] on Cluster too, where Redis checks each key a command touches.
--
-- K itself holds only the record and what the call sets on it; the lock's
-- key names and the options are read through its metatable, made once
-- per lock name and options text, and kept by the library for the calls
-- after (up to LOCK_NAMES_MAX names): a table of twenty fields
-- and six concatenations cost a call about 14 000 instructions, where a
-- look-up and a table of one field cost about 4 000. Nothing writes those
-- fields of K (a write would go to K, and shadow the shared one for that
-- call only).
local function lock_keys_at(opts, base)
  opts = opts or ''
  local o = OPTIONS[opts]
  if not o then
    local delay, hist, keep, readers, inline, retention, lease, heard, channel =
      string.match(opts, '^(%d+):(%d+):(%d+):(%d+):(%d?):(%d+):(%d+):(%d):(.*)$')
    o = {options = {delay_ms = tonumber(delay) or 0, hist_n = tonumber(hist) or 0, keep_ms = tonumber(keep) or 0,
      max_readers = tonumber(readers) or 0, index = inline == '1', keep_px = keep or '0',
      retention = retention or '0', alive_ms = lease or '0', check_heard = heard or '0', channel = channel},
      names = {}}
    if OPTIONS_N >= 16 then
      OPTIONS, OPTIONS_N = {}, 0
    end
    OPTIONS[opts], OPTIONS_N = o, OPTIONS_N + 1
  end
  local lock = KEYS[base + 1]
  local m = o.names[lock]
  if not m then
    local k = {lock = lock, fence = lock .. ':fence', queue = lock .. ':queue', alive = lock .. ':alive',
      waiters = lock .. ':waiters', readers = lock .. ':readers', delay = lock .. ':delay'}
    for f, v in pairs(o.options) do
      k[f] = v
    end
    m = {__index = k}
    if LOCK_NAMES_N >= LOCK_NAMES_MAX then
      for _, each in pairs(OPTIONS) do
        each.names = {}
      end
      LOCK_NAMES_N = 0
    end
    o.names[lock], LOCK_NAMES_N = m, LOCK_NAMES_N + 1
  end
  return setmetatable({record = KEYS[base + 2]}, m)
end

-- lock_keys is K for the lock scripts' KEYS[1..2] (lock, record), with
-- the lock's options and the calling gateway's, all the same on each of
-- its calls, 'delay:history:keep:readers:index:retention:lease:heard:
-- channel': the lock delay, ms; how many events the history keeps (0:
-- none); how long it outlives the last grant or renewal it records, ms;
-- how many shared holders it may have at once (0: no cap; see
-- shared_full); '1' when the lock scripts write the index themselves, '0'
-- when the gateway does (Cluster; see lib_index.lua; the retention also
-- sets the index's period: half of it); how long the fencing counter outlives its last use, ms
-- (K.retention); how long a waiter counts as alive without a heartbeat,
-- and a grant handed to it waits for its pick-up, ms (K.alive_ms); '1' to
-- drop a waiter whose gateway does not hear the hand-off (K.check_heard:
-- exact on a single Redis; on Cluster PUBLISH counts one node); and the
-- gateway's channel, for hand-off messages to its waiters (K.channel). As
-- one argument they cost a call one argument, parsed once per gateway.
local function lock_keys(opts)
  return lock_keys_at(opts, 0)
end
