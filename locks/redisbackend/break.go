package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// breakReply is lua/break.lua's reply.
type breakReply struct {
	held   bool // false: nobody held the lock
	grants int
	left   time.Duration
	near   *nearGrant // the waiter of this gateway the lock went to in full
}

// parseBreak reads {GRANTED, broken, left, [waiter id, fence, ttl, now, at]}
// or {NOT_GRANTED}.
func parseBreak(out []any, err error) (breakReply, error) {
	if err != nil {
		return breakReply{}, err
	}
	if len(out) == 0 {
		return breakReply{}, unexpectedReply(out)
	}
	code, _ := out[0].(int64)
	if code == codeNotGranted {
		return breakReply{}, nil
	}
	if code != codeGranted || len(out) < 3 {
		return breakReply{}, unexpectedReply(out)
	}
	n, _ := out[1].(int64)
	left, _ := out[2].(int64)
	rp := breakReply{held: true, grants: int(n), left: millis(left)}
	if len(out) == 8 {
		id, _ := out[3].(string)
		var v [4]int64
		for i := range v {
			v[i], _ = out[4+i].(int64)
		}
		rp.near = &nearGrant{waiterID: id,
			rp: reply{granted: true, fence: v[0], ttl: millis(v[1]), now: v[2], at: v[3], handed: true, rank: -1}}
	}
	return rp, nil
}

// callBreak runs lua/break.lua on key's lock.
func (r *Backend) callBreak(ctx context.Context, key locks.Key, by string, period time.Duration) (rp breakReply, ackErr, err error) {
	k := r.lockKeys(key)
	cmd, ackErr := r.run(ctx, breakScript, k.all(), r.arg.retention, r.arg.checkHeard, r.arg.opts, r.arg.channel, by, period.Milliseconds())
	rp, err = parseBreak(cmd.Slice())
	return rp, ackErr, err
}

// Break implements Breaker. The script may hand the lock in full to a
// waiter of this gateway, which gets it as from a release (handOver); the
// replica barrier covers that grant, and a break itself, like a release,
// is not acknowledged.
func (r *Backend) Break(ctx context.Context, key locks.Key, by string, period time.Duration) (locks.Broken, error) {
	if err := locks.ValidBreakPeriod(period); err != nil {
		return locks.Broken{}, err
	}
	start := time.Now()
	res := resource{lockKind, key}
	rp, ackErr, err := r.callBreak(ctx, key, by, period)
	if err != nil {
		r.waiters.requestBeat() // a waiter handed the lock learns it from its own script
		return locks.Broken{}, locks.Unavailable("break", res, err)
	}
	if !rp.held {
		return locks.Broken{}, fmt.Errorf("break %s: %w", key, locks.ErrNotHeld)
	}
	if rp.near != nil {
		r.handOver(ctx, res, *rp.near, start, ackErr)
	}
	return locks.Broken{Grants: rp.grants, Left: rp.left}, nil
}
