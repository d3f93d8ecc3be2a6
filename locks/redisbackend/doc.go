// Package redisbackend is the Redis backend of package locks: one Redis,
// Redis Cluster or Sentinel, shared by any number of gateways. Each step is
// a script of package lua, run as a Redis function (or EVALSHA), so every
// check-then-act is atomic on the Redis side. It passes the conformance
// suite in locks/locktest.
//
// # Waiting
//
// The hand-off happens inside the release script: it makes a provisional grant
// for the waiter, with a lease of at most Options.WaiterLease (3 s by
// default), and publishes one message, the waiter's id, to the waiter's
// gateway. The message means only "look again": the waiter runs the acquire
// script, which finds the grant its token holds, picks it up (its lease
// becomes the TTL asked for) and returns the authoritative fencing token
// and TTL. So a hand-off costs two script calls however many wait, and no
// message, however late, duplicated or reordered, can make a gateway answer
// for a grant that is not live, or release one it did not come for. When the
// waiter waits on the releasing gateway itself, the release script grants
// it in full and says so in its reply, which that gateway passes to its
// waiter: one script call, no message.
//
// A holder that crashes publishes nothing, so the first waiter looks again
// when the holder's lease would end; and every gateway with waiters sends a
// heartbeat every third of the waiter lease, one pipeline per Redis node
// for all its locks, which keeps its waiters alive, hands on a lock whose
// lease ran out, and says which of its waiters are no longer queued (handed
// the lock, or dropped). Those look again: they pick up their grant, or
// rejoin the queue in their old place with what is left of their wait. A
// heartbeat that fails wakes its waiters too, so that they learn of an
// outage within about a heartbeat.
//
// A waiter whose gateway dies is skipped at once on a single Redis (nobody
// hears its hand-off), and otherwise once its heartbeat lapses. A grant
// handed to a waiter whose gateway froze, died or was cut off ends with its
// provisional lease, and the queue moves on within a heartbeat after that.
//
// # Redis layout
//
// lua/lib_keys.lua describes the keys of a lock, and says where the other
// keys (a semaphore's, idempotency records, a namespace's index of held
// locks) are described: that is the one description, which the scripts and
// this package follow. For a lock ns/name and the default prefix
// "lockgate:" the keys are lockgate:{ns/name}, the grant, whose PEXPIRE is
// the lease, and lockgate:{ns/name}:<part> for its other parts.
//
// The shared hash tag {ns/name} puts a lock's keys in one Cluster slot. A
// held lock costs its hash and its fence key: 320 to 400 bytes of MEMORY
// USAGE, 450 to 550 bytes of used_memory, for names of 25 to 70 bytes (Redis
// 7.0, measured with 20 000 locks). Each waiter costs about 300 bytes more
// while it waits; the queue's keys expire a minute after the last waiter's
// deadline. A released name leaves its fence key behind, 90 to 120 bytes of
// MEMORY USAGE and 180 to 230 bytes of used_memory without a history, for
// Options.FenceRetention (24 h by default, the gateway's --fence-retention),
// and then it expires; and its entry in the namespace's index, about 35
// bytes, for one to two index periods (see list.go).
//
// # Fencing tokens
//
// A new fencing token is the larger of the last one plus one and the Redis
// clock in microseconds. The clock makes tokens increase across the loss
// of the fence key, a restart from stale persistence and a failover to a
// replica that had not received the last grants, as long as the clock of
// the Redis that grants is not behind the one that granted before by more
// than the time between their grants; the counter covers a clock that
// steps back within the retention.
//
// # Eviction
//
// Every key above has a TTL, so a Redis whose maxmemory-policy is anything
// but noeviction (volatile-* as much as allkeys-*) deletes live locks when
// it runs short of memory, and hands them out again. Backend.Check fails on
// such a Redis, naming the setting, and Backend.CheckEviction says so at
// start, or that Redis refused to tell (CONFIG renamed or not allowed, as
// on some managed services), in which case the operator must check.
package redisbackend
