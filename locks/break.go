package locks

import (
	"context"
	"fmt"
	"time"
)

// Breaker is what a backend offers the administrators of a namespace:
// ending grants that are not theirs. Who may call it is the caller's to
// decide (the gateway asks auth.Claims.Administers); the backend needs no
// owner token.
type Breaker interface {
	// Break ends every grant of the lock (the exclusive one, or every
	// shared one), and hands the lock to the waiters at the head of its
	// queue as a release does: the next grant has a larger fencing token.
	// by, the breaker's subject, goes into the history's "broken" events.
	// Each broken grant's holder learns it at its next renew, re-entry or
	// release after the grant ended: a *NotHolderError with ReasonBroken
	// (for RecordTTL). A lock nobody holds gets ErrNotHeld, and nothing
	// changes. A break whose outcome is unknown (ErrUnavailable) may have
	// happened: breaking again may end the next holder's grant.
	//
	// A period of 0 ends the grants now. A longer one lets each run on
	// until the least of its lease, the period, and the end of an earlier
	// break (a break shortens a period, never lengthens it): until then
	// its holder may work, renew (its lease never passes that end, and the
	// renewal says so in its TTL) and release as usual; then the grant
	// ends broken, and the lock goes on as when a lease ends. A grant
	// handed to a waiter that has not picked it up yet ends now whatever
	// the period.
	Break(ctx context.Context, key Key, by string, period time.Duration) (Broken, error)
}

// Broken is what a Break ended.
type Broken struct {
	// Grants is how many grants it ended, or will end at its period's
	// end: 1 for an exclusive holder, or the number of shared holders.
	Grants int
	// Left is how long until the last of them ends: 0 when all ended now.
	Left time.Duration
}

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
func (r *Redis) callBreak(ctx context.Context, key Key, by string, period time.Duration) (rp breakReply, ackErr, err error) {
	k := r.lockKeys(key)
	cmd, ackErr := r.run(ctx, breakScript, k.all(), r.arg.retention, r.arg.checkHeard, r.arg.opts, r.arg.channel, by, period.Milliseconds())
	rp, err = parseBreak(cmd.Slice())
	return rp, ackErr, err
}

// Break implements Breaker. The script may hand the lock in full to a
// waiter of this gateway, which gets it as from a release (handOver); the
// replica barrier covers that grant, and a break itself, like a release,
// is not acknowledged.
func (r *Redis) Break(ctx context.Context, key Key, by string, period time.Duration) (Broken, error) {
	if err := validBreakPeriod(period); err != nil {
		return Broken{}, err
	}
	start := time.Now()
	res := resource{lockKind, key}
	rp, ackErr, err := r.callBreak(ctx, key, by, period)
	if err != nil {
		r.waiters.requestBeat() // a waiter handed the lock learns it from its own script
		return Broken{}, unavailable("break", res, err)
	}
	if !rp.held {
		return Broken{}, fmt.Errorf("break %s: %w", key, ErrNotHeld)
	}
	if rp.near != nil {
		r.handOver(ctx, res, *rp.near, start, ackErr)
	}
	return Broken{Grants: rp.grants, Left: rp.left}, nil
}

// validBreakPeriod refuses a negative period, or one with a fraction of a
// millisecond, which the Redis backend could not keep.
func validBreakPeriod(period time.Duration) error {
	if period < 0 || period%time.Millisecond != 0 {
		return fmt.Errorf("%w: a break period is whole milliseconds, 0 or more", ErrInvalid)
	}
	return nil
}

// Break implements Breaker.
func (m *Memory) Break(_ context.Context, key Key, by string, period time.Duration) (Broken, error) {
	if err := validBreakPeriod(period); err != nil {
		return Broken{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	l := m.locks[key]
	if l == nil {
		return Broken{}, fmt.Errorf("break %s: %w", key, ErrNotHeld)
	}
	n, ended, left := len(l.holders), false, time.Duration(0)
	for h, g := range l.holders {
		// Its end under this break: the least of its lease (which an
		// earlier break capped already) and the period from now.
		end := now
		if period > 0 {
			end = g.expiresAt
			if p := now.Add(period); p.Before(end) {
				end = p
			}
		}
		if end.After(now) {
			if g.breakBy == "" || end.Before(g.breakEnd) {
				g.breakBy, g.breakEnd = by, end
			}
			g.expiresAt = end
			g.expiry.Reset(end.Sub(now))
			m.noteLocked(g, false, now)
			g.keepIdem()
			left = max(left, end.Sub(now))
			continue
		}
		ended = true
		g.expiry.Stop()
		m.records[g.tokenSum] = memRecord{broken: true, until: now.Add(RecordTTL).UnixNano()}
		m.recordLocked(key, Event{Kind: "broken", At: now.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence, By: by})
		delete(l.holders, h)
	}
	if ended {
		m.freedLocked(key, l, now)
	}
	return Broken{Grants: n, Left: left}, nil
}
