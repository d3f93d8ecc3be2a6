-- indexed: note in a lock's name record that the namespace's index lists
-- the name until a time (see lib_fence.lua x, note_indexed). On Redis
-- Cluster the gateway runs it after index.lua wrote that entry, so that
-- the name's next grants, whose leases end before then, write nothing to
-- the index. It only ever moves x later, and a call lost or repeated
-- changes no holder: at worst a later grant writes the entry again.
--
-- KEYS[1]  the lock's name record (see lib_keys.lua)
-- ARGV[1]  until when the index lists the name, ms on this node's clock
--          (the lock script's until, which it computed on this node)
-- ARGV[2]  how long a record that is gone lives when made anew, ms (the
--          fence retention)
--
-- Returns  1

note_indexed({fence = KEYS[1]}, tonumber(ARGV[1]), ARGV[2])
return 1
