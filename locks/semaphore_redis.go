package locks

import (
	"context"
	"fmt"
	"time"
)

// AcquirePermit implements Semaphores.
func (r *Redis) AcquirePermit(ctx context.Context, key Key, req SemaphoreRequest) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	return r.acquire(ctx, resource{semaphoreKind, key}, req.AcquireRequest, req.Limit)
}

// ReleasePermit implements Semaphores.
func (r *Redis) ReleasePermit(ctx context.Context, key Key, token string) (Released, error) {
	return r.release(ctx, resource{semaphoreKind, key}, token, "")
}

// RenewPermit implements Semaphores.
func (r *Redis) RenewPermit(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error) {
	if err := validateRenewTTL(ttl); err != nil {
		return Lease{}, err
	}
	res := resource{semaphoreKind, key}
	start := time.Now()
	rp, ackErr, err := r.callSemRenew(ctx, key, renewArgs{tokHash: tokenHash(token), ttl: ttl})
	if err != nil {
		return Lease{}, unavailable("renew", res, err)
	}
	if rp.notHolder != nil {
		return Lease{}, fmt.Errorf("renew %s: %w", res, rp.notHolder)
	}
	if ackErr != nil {
		return Lease{}, unavailable("renew", res, renewed(ackErr))
	}
	return Lease{FencingToken: rp.fence, TTL: rp.ttl, ExpiresAt: start.Add(rp.ttl)}, nil
}

// InspectSemaphore implements Semaphores.
func (r *Redis) InspectSemaphore(ctx context.Context, key Key) (SemaphoreInfo, error) {
	res := resource{semaphoreKind, key}
	info, held, err := r.callSemInspect(ctx, key, time.Now())
	if err != nil {
		return SemaphoreInfo{}, unavailable("inspect", res, err)
	}
	if !held {
		return SemaphoreInfo{}, fmt.Errorf("inspect %s: %w", res, ErrNotHeld)
	}
	return info, nil
}

// ResizeSemaphore implements Semaphores.
func (r *Redis) ResizeSemaphore(ctx context.Context, key Key, limit int) (SemaphoreSize, error) {
	if err := validateLimit(limit); err != nil {
		return SemaphoreSize{}, err
	}
	res := resource{semaphoreKind, key}
	size, inUse, ackErr, err := r.callSemResize(ctx, key, limit)
	if err != nil {
		return SemaphoreSize{}, unavailable("resize", res, err)
	}
	if !inUse {
		return SemaphoreSize{}, fmt.Errorf("resize %s: %w", res, ErrNotHeld)
	}
	if ackErr != nil {
		return SemaphoreSize{}, unavailable("resize", res, resized(ackErr))
	}
	return size, nil
}
