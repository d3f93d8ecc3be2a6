package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// setAcquireScript takes every lock of a set or none (lua/set_acquire.lua).
var setAcquireScript = newScript("set_acquire")

// setAcquireReply is lua/set_acquire.lua's reply.
type setAcquireReply struct {
	granted bool
	ttl     time.Duration // the leases granted; or when the lock in the way may be free
	fences  []int64       // one per lock, in the order of the keys
	ats     []int64       // when each was acquired, ms on the Redis clock
	now     int64         // the Redis clock when the script ran, ms
	blocked int           // the index of the lock in the way, when refused
}

// callSetAcquire runs lua/set_acquire.lua on keys: lock i for the owner
// token whose hash is tokHashes[i].
func (r *Backend) callSetAcquire(ctx context.Context, id string, keys []locks.Key, tokHashes []string, req locks.AcquireRequest) (rp setAcquireReply, ackErr, err error) {
	ks := make([]string, 0, 10*len(keys))
	for i, k := range keys {
		ks = append(ks, r.lockKeys(k).withToken(tokHashes[i]).all()...)
	}
	args := make([]any, 0, 7+len(keys))
	args = append(args, req.TTL.Milliseconds(), req.Subject, req.Owner, r.arg.retention, r.arg.checkHeard, r.arg.opts, optionalMs(req.MaxHold))
	for _, h := range tokHashes {
		args = append(args, h)
	}
	var cmd *redis.Cmd
	cmd, ackErr = r.exec(ctx, setAcquireScript, id, "", ks, args...)
	out, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return rp, ackErr, err
	case len(out) == 3+2*len(keys) && out[0] == codeGranted:
		rp = setAcquireReply{granted: true, ttl: millis(out[1]), now: out[2], fences: make([]int64, len(keys)), ats: make([]int64, len(keys))}
		for i := range keys {
			rp.fences[i], rp.ats[i] = out[3+2*i], out[4+2*i]
		}
		return rp, ackErr, nil
	case len(out) == 4 && out[0] == codeNotGranted && out[3] >= 1 && int(out[3]) <= len(keys):
		return setAcquireReply{ttl: millis(out[1]), blocked: int(out[3]) - 1}, ackErr, nil
	}
	return rp, ackErr, unexpectedReply(out)
}

// AcquireAll implements allAtOnce: one script on a single Redis. On
// Cluster the locks of a set live on different nodes, and the set takes
// them in order instead.
func (r *Backend) AcquireAll(ctx context.Context, keys []locks.Key, owners []string, req locks.AcquireRequest) ([]locks.Lease, bool, error) {
	if _, single := r.client.(*redis.Client); !single {
		return nil, false, nil
	}
	hashes := make([]string, len(owners))
	for i, o := range owners {
		hashes[i] = locks.TokenHash(o)
	}
	start := time.Now()
	id := newCallID()
	rp, ackErr, err := r.callSetAcquire(ctx, id, keys, hashes, req)
	if err != nil || (rp.granted && ackErr != nil) {
		cause := err
		if cause == nil {
			cause = ackErr
		}
		// The script may have run, or ran and the replicas did not
		// confirm it: release every lock, the first one with the call
		// fenced off (its record lives beside the first lock), so that a
		// delivery that reaches Redis only now does nothing.
		r.background(ctx, func(ctx context.Context) {
			lockKind.callRelease(ctx, r, keys[0], newCallID(), id, releaseArgs{tokHash: hashes[0]})
			for i := 1; i < len(keys); i++ {
				r.release(ctx, resource{lockKind, keys[i]}, owners[i], "")
			}
		})
		return nil, true, locks.Unavailable("acquire set at", keys[0], cause)
	}
	if !rp.granted {
		return nil, true, fmt.Errorf("acquire set: %s: %w", keys[rp.blocked], lockKind.held(reply{ttl: rp.ttl}))
	}
	leases := make([]locks.Lease, len(keys))
	for i := range keys {
		// As reply.lease counts a grant's: from the call's start.
		leases[i] = reply{fence: rp.fences[i], ttl: rp.ttl, at: rp.ats[i], now: rp.now}.lease(start, req.MaxHold)
	}
	if ctx.Err() != nil { // the caller left: nobody would release them
		r.background(ctx, func(ctx context.Context) {
			for i, k := range keys {
				r.release(ctx, resource{lockKind, k}, owners[i], "")
			}
		})
		return nil, true, fmt.Errorf("acquire set: %w", ctx.Err())
	}
	return leases, true, nil
}
