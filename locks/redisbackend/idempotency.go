package redisbackend

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
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
func (r *Backend) AcquireOnce(ctx context.Context, key locks.Key, req locks.AcquireRequest, idemKey string) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	c, err := locks.NewIdemCall(locks.APIPath(false, key), req, 0, idemKey)
	if err != nil {
		return locks.Grant{}, err
	}
	req.Keep = true // the record leads a retry to a grant made as the caller left
	res := resource{lockKind, key}
	return locks.AcquireOnce(ctx, res.String(), redisIdem{r, res}, c, r.idemPending(req.Wait),
		func(ctx context.Context) (locks.Grant, error) { return r.acquire(ctx, res, req, 0) },
		func(ctx context.Context, token string) { r.release(ctx, res, token, "") })
}

// AcquirePermitOnce implements Idempotent.
func (r *Backend) AcquirePermitOnce(ctx context.Context, key locks.Key, req locks.SemaphoreRequest, idemKey string) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	c, err := locks.NewIdemCall(locks.APIPath(true, key), req.AcquireRequest, req.Limit, idemKey)
	if err != nil {
		return locks.Grant{}, err
	}
	req.Keep = true
	res := resource{semaphoreKind, key}
	return locks.AcquireOnce(ctx, res.String(), redisIdem{r, res}, c, r.idemPending(req.Wait),
		func(ctx context.Context) (locks.Grant, error) {
			return r.acquire(ctx, res, req.AcquireRequest, req.Limit)
		},
		func(ctx context.Context, token string) { r.release(ctx, res, token, "") })
}

// idemPending bounds how long an acquire that waits for wait runs: the
// wait, a last script run and the idempotency steps, each bounded by the
// Redis timeout, and slack.
func (r *Backend) idemPending(wait time.Duration) time.Duration {
	return wait + 3*r.opts.Timeout + locks.IdemPendingSlack
}

// redisIdem keeps the idempotency records of one lock or semaphore.
type redisIdem struct {
	r   *Backend
	res resource
}

func (s redisIdem) Begin(ctx context.Context, c *locks.IdemCall, pending time.Duration) (locks.IdemFound, error) {
	id := newCallID()
	found, ackErr, err := s.r.callIdemBegin(ctx, s.r.idemKeys(s.res, c.ID), id, idemBeginArgs{fingerprint: c.Fingerprint, nonce: c.Nonce, pending: pending})
	if err != nil {
		c.Unknown = id
		return locks.IdemFound{}, locks.Unavailable("acquire", s.res, err)
	}
	if found.Outcome == locks.IdemLive && ackErr != nil { // the grant replayed is not known to be on the replicas
		return locks.IdemFound{}, locks.Unavailable("acquire", s.res, ackErr)
	}
	return found, nil
}

// Done records g. When its outcome is unknown (the reply was lost, or
// never came), it asks once more with the same call id: once.lua answers
// what the first delivery did, or runs the call now if none arrived. A
// grant recorded is then never given back for want of a reply.
func (s redisIdem) Done(ctx context.Context, c *locks.IdemCall, g locks.Grant) error {
	id, keys := newCallID(), s.r.idemKeys(s.res, c.ID)
	args := idemDoneArgs{fingerprint: c.Fingerprint, nonce: c.Nonce, tokHash: locks.TokenHash(g.Token), sealed: c.Seal(g.Token),
		fence: g.FencingToken, grace: locks.IdempotencyGrace}
	var err error
	for range 2 {
		var recorded bool
		if recorded, err = s.r.callIdemDone(ctx, keys, id, args); err == nil {
			if !recorded {
				return locks.ErrIdemTaken
			}
			return nil
		}
	}
	c.Unknown = id
	return locks.Unavailable("acquire", s.res, err)
}

// Abort forgets c's pending record, or its record of the grant c gave
// back, and fences off the call of c whose outcome is unknown, if any. With wait unset it runs in the background:
// the call's answer (a 503) does not wait for a Redis in trouble, and a
// record it fails to forget expires on its own.
func (s redisIdem) Abort(ctx context.Context, c *locks.IdemCall, wait bool) {
	keys, fence, args := s.r.idemKeys(s.res, c.ID), c.Unknown, idemAbortArgs{nonce: c.Nonce, gaveBack: c.GaveBack}
	if wait {
		s.r.callIdemAbort(ctx, keys, fence, args)
		return
	}
	s.r.background(ctx, func(ctx context.Context) { s.r.callIdemAbort(ctx, keys, fence, args) })
}
