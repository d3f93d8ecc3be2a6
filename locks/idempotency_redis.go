package locks

import (
	"context"
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
	req.keep = true // the record leads a retry to a grant made as the caller left
	res := resource{lockKind, key}
	return acquireOnce(ctx, res.String(), redisIdem{r, res}, c, r.idemPending(req.Wait),
		func(ctx context.Context) (Grant, error) { return r.acquire(ctx, res, req, 0) },
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
	req.keep = true
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

func (s redisIdem) begin(ctx context.Context, c *idemCall, pending time.Duration) (idemFound, error) {
	id := newCallID()
	found, ackErr, err := s.r.callIdemBegin(ctx, s.r.idemKeys(s.res, c.id), id, idemBeginArgs{fingerprint: c.fingerprint, nonce: c.nonce, pending: pending})
	if err != nil {
		c.unknown = id
		return idemFound{}, unavailable("acquire", s.res, err)
	}
	if found.outcome == idemLive && ackErr != nil { // the grant replayed is not known to be on the replicas
		return idemFound{}, unavailable("acquire", s.res, ackErr)
	}
	return found, nil
}

// done records g. When its outcome is unknown (the reply was lost, or
// never came), it asks once more with the same call id: once.lua answers
// what the first delivery did, or runs the call now if none arrived. A
// grant recorded is then never given back for want of a reply.
func (s redisIdem) done(ctx context.Context, c *idemCall, g Grant) error {
	id, keys := newCallID(), s.r.idemKeys(s.res, c.id)
	args := idemDoneArgs{fingerprint: c.fingerprint, nonce: c.nonce, tokHash: tokenHash(g.Token), sealed: c.seal(g.Token),
		fence: g.FencingToken, grace: IdempotencyGrace}
	var err error
	for range 2 {
		var recorded bool
		if recorded, err = s.r.callIdemDone(ctx, keys, id, args); err == nil {
			if !recorded {
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
	keys, fence, args := s.r.idemKeys(s.res, c.id), c.unknown, idemAbortArgs{nonce: c.nonce, gaveBack: c.gaveBack}
	if wait {
		s.r.callIdemAbort(ctx, keys, fence, args)
		return
	}
	s.r.background(ctx, func(ctx context.Context) { s.r.callIdemAbort(ctx, keys, fence, args) })
}
