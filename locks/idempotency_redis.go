package locks

import (
	"context"
	"fmt"
	"time"
)

// Idempotency records in Redis: for a lock ns/name and the default prefix,
//
//	lockgate:{ns/name}:idem:<id>      hash (see lua/idem_lib.lua)
//	lockgate:sem:{ns/name}:idem:<id>  the same, for a permit of a semaphore
//
// with the resource's hash tag, so that one script reaches the record and
// the grant on Redis Cluster. A record's MEMORY USAGE is about 660 bytes
// (Redis 7, a lock name of 30 bytes) while it is remembered.

// AcquireOnce implements Idempotent.
func (r *Redis) AcquireOnce(ctx context.Context, key Key, req AcquireRequest, idemKey string) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	c, err := newIdemCall(apiPath(false, key), req, 0, idemKey)
	if err != nil {
		return Grant{}, err
	}
	res := resource{lockKind, key}
	return acquireOnce(ctx, res.String(), redisIdem{r, res}, c, r.idemPending(req.Wait),
		func(ctx context.Context) (Grant, error) { return r.acquire(ctx, res, req, r.lockArgs(req)...) },
		func(ctx context.Context, token string) { r.release(ctx, res, token, "") })
}

// AcquirePermitOnce implements Idempotent.
func (r *Redis) AcquirePermitOnce(ctx context.Context, key Key, req SemaphoreRequest, idemKey string) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	c, err := newIdemCall(apiPath(true, key), req.AcquireRequest, req.Limit, idemKey)
	if err != nil {
		return Grant{}, err
	}
	res := resource{semaphoreKind, key}
	return acquireOnce(ctx, res.String(), redisIdem{r, res}, c, r.idemPending(req.Wait),
		func(ctx context.Context) (Grant, error) { return r.acquire(ctx, res, req.AcquireRequest, req.Limit) },
		func(ctx context.Context, token string) { r.release(ctx, res, token, "") })
}

// idemPending bounds how long an acquire that waits for wait runs: the
// wait, a last script run and the idempotency steps, each bounded by the
// Redis timeout, and slack.
func (r *Redis) idemPending(wait time.Duration) time.Duration {
	return wait + 3*r.opts.Timeout + idemPendingSlack
}

// redisIdem keeps the idempotency records of one lock or semaphore.
type redisIdem struct {
	r   *Redis
	res resource
}

// keys are KEYS of the idempotency scripts: the record, then the lock's
// hash or the semaphore's holders and leases.
func (s redisIdem) keys(c *idemCall) []string {
	if s.res.kind == semaphoreKind {
		k := s.r.semKeys(s.res.key)
		return []string{k.holders + ":idem:" + c.id, k.holders, k.leases}
	}
	k := s.r.lockKeys(s.res.key)
	return []string{k.lock + ":idem:" + c.id, k.lock}
}

func (s redisIdem) begin(ctx context.Context, c *idemCall, pending time.Duration) (idemFound, error) {
	id := newCallID()
	cmd, ackErr := s.r.exec(ctx, idemBeginScript, id, "", s.keys(c), c.fingerprint, c.nonce, pending.Milliseconds())
	out, err := cmd.Slice()
	if err != nil {
		c.unknown = id
		return idemFound{}, unavailable("acquire", s.res, err)
	}
	n := func(i int) int64 {
		if i >= len(out) {
			return 0
		}
		v, _ := out[i].(int64)
		return v
	}
	switch n(0) {
	case 0:
		return idemFound{outcome: idemBegun}, nil
	case 1:
		if ackErr != nil { // the grant replayed is not known to be on the replicas
			return idemFound{}, unavailable("acquire", s.res, ackErr)
		}
		sealed, _ := out[1].(string)
		return idemFound{outcome: idemLive, sealed: sealed, fence: n(2), ttl: millis(max(n(3), 0)), holds: int(n(4))}, nil
	case 2:
		return idemFound{outcome: idemInProgress, ttl: millis(max(n(1), 0))}, nil
	case 3:
		return idemFound{outcome: idemMismatch}, nil
	case 4:
		return idemFound{outcome: idemEnded}, nil
	}
	return idemFound{}, fmt.Errorf("acquire %s: idem_begin answered %v", s.res, out)
}

// done records g. When its outcome is unknown (the reply was lost, or
// never came), it asks once more with the same call id: once.lua answers
// what the first delivery did, or runs the call now if none arrived. A
// grant recorded is then never given back for want of a reply.
func (s redisIdem) done(ctx context.Context, c *idemCall, g Grant) error {
	id, keys := newCallID(), s.keys(c)
	args := []any{c.fingerprint, c.nonce, tokenHash(g.Token), c.seal(g.Token), g.FencingToken, IdempotencyGrace.Milliseconds()}
	var err error
	for range 2 {
		var out []int64
		cmd, _ := s.r.exec(ctx, idemDoneScript, id, "", keys, args...)
		if out, err = cmd.Int64Slice(); err == nil {
			if out[0] != codeGranted {
				return errIdemTaken
			}
			return nil
		}
	}
	c.unknown = id
	return unavailable("acquire", s.res, err)
}

// abort forgets c's pending record, or its record of the grant c gave
// back, and fences off the call of c whose outcome is unknown, if any. With wait unset it runs in the background:
// the call's answer (a 503) does not wait for a Redis in trouble, and a
// record it fails to forget expires on its own.
func (s redisIdem) abort(ctx context.Context, c *idemCall, wait bool) {
	keys, fence, gaveBack := s.keys(c)[:1], c.unknown, c.gaveBack
	if wait {
		s.r.exec(ctx, idemAbortScript, newCallID(), fence, keys, c.nonce, gaveBack)
		return
	}
	s.r.background(ctx, func(ctx context.Context) { s.r.exec(ctx, idemAbortScript, newCallID(), fence, keys, c.nonce, gaveBack) })
}
