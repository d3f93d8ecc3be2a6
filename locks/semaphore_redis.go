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
func (r *Redis) ReleasePermit(ctx context.Context, key Key, token string) error {
	_, err := r.release(ctx, resource{semaphoreKind, key}, token, "")
	return err
}

// RenewPermit implements Semaphores.
func (r *Redis) RenewPermit(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error) {
	if err := validateRenewTTL(ttl); err != nil {
		return Lease{}, err
	}
	res := resource{semaphoreKind, key}
	keys := r.semKeys(key)
	start := time.Now()
	h := tokenHash(token)
	cmd, ackErr := r.run(ctx, semRenewScript, []string{keys.holders, keys.leases, keys.record(h)},
		h, ttl.Milliseconds())
	out, err := cmd.Int64Slice()
	if err != nil {
		return Lease{}, unavailable("renew", res, err)
	}
	if out[0] != codeGranted {
		return Lease{}, fmt.Errorf("renew %s: %w", res, notHolder(out))
	}
	if ackErr != nil {
		return Lease{}, unavailable("renew", res, renewed(ackErr))
	}
	ttl = millis(out[2])
	return Lease{FencingToken: out[1], TTL: ttl, ExpiresAt: start.Add(ttl)}, nil
}

// InspectSemaphore implements Semaphores.
func (r *Redis) InspectSemaphore(ctx context.Context, key Key) (SemaphoreInfo, error) {
	res := resource{semaphoreKind, key}
	keys := r.semKeys(key)
	start := time.Now()
	cmd, _ := r.run(ctx, semInspectScript, []string{keys.holders, keys.leases, keys.queue})
	out, err := cmd.Slice()
	if err != nil {
		return SemaphoreInfo{}, unavailable("inspect", res, err)
	}
	if len(out) < 3 {
		return SemaphoreInfo{}, fmt.Errorf("inspect %s: %w", res, ErrNotHeld)
	}
	limit, _ := out[0].(int64)
	waiting, _ := out[1].(int64)
	info := SemaphoreInfo{Limit: int(limit), Waiters: int(waiting)}
	for h := out[3:]; len(h) >= 5; h = h[5:] {
		fence, _ := h[0].(int64)
		pttl, _ := h[1].(int64)
		subject, _ := h[2].(string)
		owner, _ := h[3].(string)
		at, _ := h[4].(int64)
		ttl := millis(pttl)
		info.Holders = append(info.Holders, Holder{Holds: 1,
			Lease:   Lease{FencingToken: fence, TTL: ttl, ExpiresAt: start.Add(ttl)},
			Subject: subject, Owner: owner, AcquiredAt: time.UnixMilli(at).UTC(),
		})
	}
	if len(info.Holders) == 0 {
		return SemaphoreInfo{}, fmt.Errorf("inspect %s: %w", res, ErrNotHeld)
	}
	return info, nil
}
