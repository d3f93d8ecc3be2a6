-- holds: the holds of one grant, with identity, put in front of the lock
-- and idempotency scripts. Not a script on its own.
--
-- KEYS[1]  none: these functions read and write only what they are given
-- Returns  nothing: not a script on its own
--
-- A grant is held once by the acquire that made it (the base hold, id
-- BASE_HOLD) and once more by each re-entry, whose id the gateway made. The
-- ids live in the grant: field 'hs' of K.lock for an exclusive grant, 'hs'
-- of a shared holder's JSON; absent means the base hold alone, so a grant
-- never re-entered costs nothing. The list is a string of ids, each with a
-- space on either side (' = h1 h2 '). A hold's id makes its release and its
-- re-entry repeatable: ending a hold that has ended, or taking one that is
-- held, changes nothing.

local BASE_HOLD = '='
-- ALL_HOLDS, as the hold a release ends, ends every hold of the grant: a
-- session's end does. No hold has it as its id.
local ALL_HOLDS = '*'

local function hold_list(hs)
  return hs or (' ' .. BASE_HOLD .. ' ')
end

-- has_hold says whether the grant whose list is hs has hold id.
local function has_hold(hs, id)
  return string.find(hold_list(hs), ' ' .. id .. ' ', 1, true) ~= nil
end

-- hold_count is how many holds the list hs has.
local function hold_count(hs)
  local _, n = string.gsub(hold_list(hs), '%S+', '')
  return n
end

-- with_hold is the list hs with hold id added.
local function with_hold(hs, id)
  return hold_list(hs) .. id .. ' '
end

-- without_hold is the list hs with hold id taken away (it has it).
local function without_hold(hs, id)
  local l = hold_list(hs)
  local i = string.find(l, ' ' .. id .. ' ', 1, true)
  return string.sub(l, 1, i) .. string.sub(l, i + #id + 2)
end

-- hold_ids is the list hs as the ids alone, separated by spaces.
local function hold_ids(hs)
  return string.sub(hold_list(hs), 2, -2)
end
