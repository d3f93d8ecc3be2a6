package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// AcquirePermit implements Semaphores.
func (r *Backend) AcquirePermit(ctx context.Context, key locks.Key, req locks.SemaphoreRequest) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	return r.acquire(ctx, resource{semaphoreKind, key}, req.AcquireRequest, req.Limit)
}

// ReleasePermit implements Semaphores.
func (r *Backend) ReleasePermit(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	return r.release(ctx, resource{semaphoreKind, key}, token, "")
}

// RenewPermit implements Semaphores.
func (r *Backend) RenewPermit(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if locks.IsSessionGrant(token) {
		return locks.Lease{}, fmt.Errorf("renew semaphore %s: %w", key, locks.ErrSessionGrantRenew)
	}
	return r.renewPermit(ctx, key, token, ttl)
}

// renewPermit is RenewPermit, for a session's permit too (RenewMember).
func (r *Backend) renewPermit(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.ValidateRenewTTL(ttl); err != nil {
		return locks.Lease{}, err
	}
	res := resource{semaphoreKind, key}
	start := time.Now()
	rp, ackErr, err := r.renewFencing(ctx, key, renewArgs{tokHash: locks.TokenHash(token), ttl: ttl}, r.callSemRenew)
	if err != nil {
		return locks.Lease{}, locks.Unavailable("renew", res, err)
	}
	if rp.notHolder != nil {
		return locks.Lease{}, fmt.Errorf("renew %s: %w", res, rp.notHolder)
	}
	if ackErr != nil {
		return locks.Lease{}, locks.Unavailable("renew", res, locks.Renewed(ackErr))
	}
	return locks.Lease{FencingToken: rp.fence, TTL: rp.ttl, ExpiresAt: start.Add(rp.ttl), HoldUntil: holdUntil(start, rp.capLeft)}.WithinHold(), nil
}

// InspectSemaphore implements Semaphores.
func (r *Backend) InspectSemaphore(ctx context.Context, key locks.Key) (locks.SemaphoreInfo, error) {
	res := resource{semaphoreKind, key}
	info, held, err := r.callSemInspect(ctx, key, time.Now())
	if err != nil {
		return locks.SemaphoreInfo{}, locks.Unavailable("inspect", res, err)
	}
	if !held {
		return locks.SemaphoreInfo{}, fmt.Errorf("inspect %s: %w", res, &locks.NotHeldError{Key: key, Index: info.Index})
	}
	return info, nil
}

// semWatchPoll is how often a gateway reads a semaphore that its watches
// wait on (see semPolls): the semaphore scripts send no hint, so that a
// semaphore nobody watches costs nothing more to use.
const semWatchPoll = 200 * time.Millisecond

// WatchSemaphore implements Semaphores: it reads the semaphore (one
// sem_inspect.lua), and while its index is after, waits on the reads
// that this gateway's watches of it share (semPolls).
func (r *Backend) WatchSemaphore(ctx context.Context, key locks.Key, after int64) (locks.SemaphoreWatch, error) {
	res := resource{semaphoreKind, key}
	// The read is bounded by the backend's own timeout, not by ctx's
	// wait (see locks.Watcher): a wait that ends during it answers the
	// state read.
	w, err := r.readSemaphore(context.WithoutCancel(ctx), key)
	if err != nil {
		return locks.SemaphoreWatch{}, locks.Unavailable("watch", res, err)
	}
	if after < 0 || w.Index != after || ctx.Err() != nil {
		return w, ctx.Err()
	}
	w, err = r.semPolls.wait(ctx, key, after, w)
	if ctx.Err() != nil {
		return w, ctx.Err()
	}
	if err != nil {
		return locks.SemaphoreWatch{}, locks.Unavailable("watch", res, err)
	}
	return w, nil
}

// readSemaphore reads a semaphore's state for a watch.
func (r *Backend) readSemaphore(ctx context.Context, key locks.Key) (locks.SemaphoreWatch, error) {
	info, held, err := r.callSemInspect(ctx, key, time.Now())
	return locks.SemaphoreWatch{Index: info.Index, Held: held, Info: info}, err
}

// ResizeSemaphore implements Semaphores.
func (r *Backend) ResizeSemaphore(ctx context.Context, key locks.Key, limit int) (locks.SemaphoreSize, error) {
	if err := locks.ValidateLimit(limit); err != nil {
		return locks.SemaphoreSize{}, err
	}
	res := resource{semaphoreKind, key}
	size, inUse, ackErr, err := r.callSemResize(ctx, key, limit)
	if err != nil {
		return locks.SemaphoreSize{}, locks.Unavailable("resize", res, err)
	}
	if !inUse {
		return locks.SemaphoreSize{}, fmt.Errorf("resize %s: %w", res, locks.ErrNotHeld)
	}
	if ackErr != nil {
		return locks.SemaphoreSize{}, locks.Unavailable("resize", res, locks.Resized(ackErr))
	}
	return size, nil
}
