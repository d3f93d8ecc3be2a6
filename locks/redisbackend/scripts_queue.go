package redisbackend

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/redis/go-redis/v9"
)

// kind is a kind of resource the Redis backend keeps: lockKind or
// semaphoreKind. Locks and semaphores have keys and scripts of their own,
// and share the way waiters queue, wait, and are handed what they wait for
// (Redis.acquire): each kind has its own acquire, leave, release and
// heartbeat script, and the scripts of both take the same arguments for
// those steps (acquireArgs, leaveArgs, releaseArgs) and give the same
// replies. The methods are the typed calls of those scripts.
type kind interface {
	// String names the kind in errors: "lock" or "semaphore".
	String() string
	// held is the error for a refusal whose reply is rp: "taken, try
	// again in rp.ttl".
	held(rp reply) error
	// acquireCall is the kind's acquire script, and its KEYS and ARGV for
	// a on key (see callAcquire).
	acquireCall(r *Backend, key locks.Key, a acquireArgs) (s *script, keys []string, args []any)
	// sessionAcquire is the kind's script that takes a grant in a session
	// in one step: its acquire script's KEYS and ARGV, then the session's
	// (lua/session_acquire.lua).
	sessionAcquire() *script
	// acquireReply reads a reply of the kind's acquire script, called
	// with the TTL ttl.
	acquireReply(r *Backend, cmd *redis.Cmd, ttl time.Duration) (reply, error)
	// callLeave runs the kind's leave script on key as call id, fencing
	// off the call fence ("" for none).
	callLeave(ctx context.Context, r *Backend, key locks.Key, id, fence string, a leaveArgs) (rp reply, ackErr, err error)
	// callRelease runs the kind's release script on key as call id,
	// fencing off the call fence ("" for none).
	callRelease(ctx context.Context, r *Backend, key locks.Key, id, fence string, a releaseArgs) (rp releaseReply, ackErr, err error)
	// beat is the call of the kind's heartbeat script on key for the
	// waiters ids, to send in the heartbeat's pipeline.
	beat(r *Backend, key locks.Key, ids []string) beatCall
}

var (
	lockKind      kind = lockType{}
	semaphoreKind kind = semaphoreType{}
)

// callAcquire runs the acquire script of res's kind as call id. ackErr says
// the replicas did not acknowledge it (see exec): a grant in its reply must
// not be answered.
func (r *Backend) callAcquire(ctx context.Context, res resource, id string, a acquireArgs) (rp reply, ackErr, err error) {
	s, keys, args := res.kind.acquireCall(r, res.key, a)
	cmd, ackErr := r.exec(ctx, s, id, "", keys, args...)
	rp, err = res.kind.acquireReply(r, cmd, a.ttl)
	return rp, ackErr, err
}

// resource is one lock or one semaphore.
type resource struct {
	kind kind
	key  locks.Key
}

func (res resource) String() string { return res.kind.String() + " " + res.key.String() }

// acquireArgs are ARGV of the acquire scripts (lua/acquire.lua,
// lua/sem_acquire.lua), which take the same but for their last ones.
type acquireArgs struct {
	tokHash        string
	ttl            time.Duration
	subject, owner string
	waiterID       string        // "" for an acquire that does not wait
	wait           time.Duration // how much longer the waiter waits
	arrival        int64         // its arrival number from an earlier call; 0 for a new arrival
	mode           locks.Mode    // a lock's
	value          string        // a lock's: the grant's value
	minHold        time.Duration // a lock's: see locks.AcquireRequest.MinHold
	maxHold        time.Duration // a lock's: the grant's hard cap, 0 for none
	limit          int           // a semaphore's
	priority       int           // a waiter's: see locks.AcquireRequest.Priority
	// positional: the caller appends arguments of its own after the
	// acquire's, so a lock's mode and value go whatever they are (see
	// lockType.acquireCall).
	positional bool
}

// headStart is the head start in the queue, ms, of a waiter of priority
// p: p agings (see lua/lib_queue.lua enqueue).
func (r *Backend) headStart(p int) int64 {
	return int64(p) * r.opts.PriorityAging.Milliseconds()
}

// argv is ARGV[1..11], which both acquire scripts take, with room for the
// rest.
func (a acquireArgs) argv(r *Backend) []any {
	return append(make([]any, 0, 13), a.tokHash, a.ttl.Milliseconds(), a.subject, a.owner, r.arg.retention,
		a.waiterID, r.arg.channel, a.wait.Milliseconds(), r.arg.lease, r.arg.checkHeard, a.arrival)
}

// leaveArgs are ARGV of the leave scripts (lua/leave.lua, lua/sem_leave.lua).
type leaveArgs struct {
	waiterID string // "" for an acquire that did not wait: only release
	tokHash  string
	// release: release a grant the token holds; otherwise pick it up.
	release bool
}

// argv is ARGV[1..5], which both leave scripts take, with room for a lock's
// options.
func (a leaveArgs) argv(r *Backend) []any {
	release := "0"
	if a.release {
		release = "1"
	}
	return append(make([]any, 0, 6), a.waiterID, a.tokHash, release, r.arg.retention, r.arg.checkHeard)
}

// parseLeave reads a leave script's reply: {GAVE_BACK}, or one of
// parseReply's.
func parseLeave(out []int64, err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	if len(out) >= 1 && out[0] == codeGaveBack {
		return reply{rank: -1}, nil
	}
	return parseReply(out)
}

// releaseArgs are ARGV of the release scripts (lua/release.lua,
// lua/sem_release.lua) that come from the call.
type releaseArgs struct {
	tokHash string
	hold    string // a lock's: the hold to end, "" for the base hold
	session string // a lock's: the session whose end releases it, or ""
	// member: a grant or permit of a session (locks.IsSessionGrant), on a
	// single Redis: its release leaves the session too (see
	// lua/session_acquire.lua)
	member bool
}

// heldSince is how long a grant made at at (ms on Redis's clock) has been
// held now: the release scripts answer when the grant was made, not how
// long it was held, so that the usual release reads no clock in Redis. It
// counts on the gateway's clock, so a skew between it and Redis's moves it
// (Released.Held, a metric, is clamped at nothing). A grant whose time is
// not known (0) was held for nothing known; and a release record an older
// gateway wrote ('r<held>', see layoutVersion) says how long it was held
// itself, a number that no grant's time since 2001 is below.
func heldSince(at int64) time.Duration {
	const olderRecord = 1_000_000_000_000 // ms: 2001-09-09
	switch {
	case at <= 0:
		return 0
	case at < olderRecord:
		return millis(at)
	}
	return time.Since(time.UnixMilli(at))
}

// releaseReply is a release script's reply.
type releaseReply struct {
	notHolder *locks.NotHolderError // the token holds nothing; nil: released
	holds     int                   // the holds the token still has
	// ended: the grant ended, after it was held for held.
	ended bool
	held  time.Duration
	// repeated: the grant was released before, by this call delivered
	// before or by another; nothing changed now.
	repeated bool
	// near is the waiter of the caller's gateway that the lock was handed
	// to in full, if any (a lock's).
	near *nearGrant
}

// nearGrant is a grant a release handed in full to a waiter of the
// releasing gateway.
type nearGrant struct {
	waiterID string
	rp       reply
}

// parseRelease reads a release script's reply (cmd.Result()): the usual
// one, a grant released and handed to nobody here, as a bare integer, when
// the grant was made (ms on Redis's clock), or {GRANTED, holds, [made at,
// [waiter id, fence, ttl, now, at]]} or {NOT_GRANTED, why}.
func parseRelease(v any, err error) (releaseReply, error) {
	if err != nil {
		return releaseReply{}, err
	}
	if at, ok := v.(int64); ok {
		return releaseReply{ended: true, held: heldSince(at)}, nil
	}
	out, ok := v.([]any)
	if !ok {
		return releaseReply{}, unexpectedReply(v)
	}
	if len(out) == 0 {
		return releaseReply{}, unexpectedReply(out)
	}
	code, _ := out[0].(int64)
	if code != codeGranted || len(out) < 2 {
		why := int64(whyUnknown)
		if len(out) > 1 {
			why, _ = out[1].(int64)
		}
		return releaseReply{notHolder: notHolder([]int64{code, why})}, nil
	}
	holds, _ := out[1].(int64)
	rp := releaseReply{holds: int(holds)}
	if len(out) >= 3 {
		at, _ := out[2].(int64)
		rp.ended, rp.held = true, heldSince(at)
	}
	rp.repeated = len(out) == releasedAgain
	if len(out) == releasedHandingOver {
		id, _ := out[3].(string)
		var n [4]int64
		for i := range n {
			n[i], _ = out[4+i].(int64)
		}
		rp.near = &nearGrant{waiterID: id,
			rp: reply{granted: true, fence: n[0], ttl: millis(n[1]), now: n[2], at: n[3], handed: true, rank: -1}}
	}
	return rp, nil
}

// beatCall is one call of a heartbeat script, sent in the heartbeat's own
// pipeline (see Redis.heartbeat, batcher.runAll), not through exec, and so
// with once.lua's arguments already in args.
type beatCall struct {
	script *script
	keys   []string
	args   []any
}

// beatArgs are ARGV of a heartbeat script (lua/heartbeat.lua,
// lua/sem_heartbeat.lua): the common ones, tail (a lock's options), the
// waiter ids, then once.lua's (one call id per beat, sent once).
func (r *Backend) beatArgs(ids []string, tail ...any) []any {
	args := make([]any, 0, len(ids)+7)
	args = append(args, r.arg.lease, r.arg.retention, r.arg.checkHeard)
	args = append(args, tail...)
	for _, id := range ids {
		args = append(args, id)
	}
	return r.onceArgs(args, newCallID(), "")
}
