package locks

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is the embedded backend: locks live in this process only. It has the
// same semantics as the Redis backend, so a single gateway needs no Redis,
// but it cannot share locks between processes.
type Memory struct {
	mu        sync.Mutex
	locks     map[Key]*memGrant
	lastFence int64
}

var _ Backend = (*Memory)(nil)

// memGrant is one holder of one lock.
type memGrant struct {
	tokenHash  string
	fence      int64
	subject    string
	owner      string
	acquiredAt time.Time
	ttl        time.Duration // as acquired: what a renew without a TTL restores
	expiresAt  time.Time
	expiry     *time.Timer   // ends the grant at expiresAt
	ended      chan struct{} // closed when the grant ends, to wake waiters
}

// NewMemory returns an empty embedded backend.
func NewMemory() *Memory {
	return &Memory{locks: make(map[Key]*memGrant)}
}

// Acquire implements Locker.
func (m *Memory) Acquire(ctx context.Context, key Key, req AcquireRequest) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	token := newToken()
	var deadline <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		grant, ended, remaining := m.tryAcquire(key, req, token)
		if ended == nil {
			if ctx.Err() != nil {
				// The caller left while we granted: nobody would ever release it.
				m.Release(context.WithoutCancel(ctx), key, token)
				return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
			}
			return grant, nil
		}
		if deadline == nil {
			return Grant{}, &HeldError{RetryAfter: remaining}
		}
		select {
		case <-ended:
		case <-deadline:
			return m.heldError(key)
		case <-ctx.Done():
			return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
		}
	}
}

// tryAcquire grants the lock if it is free. Otherwise it returns the current
// grant's ended channel and remaining TTL.
func (m *Memory) tryAcquire(key Key, req AcquireRequest, token string) (Grant, <-chan struct{}, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if g := m.locks[key]; g != nil {
		if remaining := g.expiresAt.Sub(now); remaining > 0 {
			return Grant{}, g.ended, remaining
		}
		m.end(key, g)
	}
	g := &memGrant{
		tokenHash:  tokenHash(token),
		fence:      m.nextFence(now),
		subject:    req.Subject,
		owner:      req.Owner,
		acquiredAt: now,
		ttl:        req.TTL,
		expiresAt:  now.Add(req.TTL),
		ended:      make(chan struct{}),
	}
	g.expiry = time.AfterFunc(req.TTL, func() { m.expire(key, g) })
	m.locks[key] = g
	return Grant{Token: token, Lease: Lease{FencingToken: g.fence, TTL: req.TTL, ExpiresAt: g.expiresAt}}, nil, 0
}

// nextFence keeps fencing tokens increasing across restarts: a new process
// starts from the wall clock in microseconds, which is past every token an
// earlier process handed out unless it granted more than one lock per
// microsecond on average, or the clock went back.
func (m *Memory) nextFence(now time.Time) int64 {
	m.lastFence = max(m.lastFence+1, now.UnixMicro())
	return m.lastFence
}

func (m *Memory) heldError(key Key) (Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var remaining time.Duration
	if g := m.locks[key]; g != nil {
		remaining = max(time.Until(g.expiresAt), 0)
	}
	return Grant{}, &HeldError{RetryAfter: remaining}
}

// expire ends g if it is still the holder and its lease has run out; a timer
// that fired just before a renewal finds a later expiry and does nothing.
func (m *Memory) expire(key Key, g *memGrant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[key] == g && !time.Now().Before(g.expiresAt) {
		m.end(key, g)
	}
}

// end removes g and wakes its waiters. m.mu must be held.
func (m *Memory) end(key Key, g *memGrant) {
	g.expiry.Stop()
	delete(m.locks, key)
	close(g.ended)
}

// holder returns the live grant that token holds, or nil. m.mu must be held.
func (m *Memory) holder(key Key, token string) *memGrant {
	g := m.locks[key]
	if g == nil || g.tokenHash != tokenHash(token) || !time.Now().Before(g.expiresAt) {
		return nil
	}
	return g
}

// Release implements Locker.
func (m *Memory) Release(_ context.Context, key Key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.holder(key, token)
	if g == nil {
		return fmt.Errorf("release %s: %w", key, ErrNotHolder)
	}
	m.end(key, g)
	return nil
}

// Renew implements Locker.
func (m *Memory) Renew(_ context.Context, key Key, token string, ttl time.Duration) (Lease, error) {
	if ttl < 0 {
		return Lease{}, fmt.Errorf("%w: ttl must not be negative", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.holder(key, token)
	if g == nil {
		return Lease{}, fmt.Errorf("renew %s: %w", key, ErrNotHolder)
	}
	if ttl == 0 {
		ttl = g.ttl
	}
	g.expiresAt = time.Now().Add(ttl)
	g.expiry.Reset(ttl)
	return Lease{FencingToken: g.fence, TTL: ttl, ExpiresAt: g.expiresAt}, nil
}

// Inspect implements Locker.
func (m *Memory) Inspect(_ context.Context, key Key) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.locks[key]
	remaining := time.Duration(0)
	if g != nil {
		remaining = time.Until(g.expiresAt)
	}
	if remaining <= 0 {
		return Info{}, fmt.Errorf("inspect %s: %w", key, ErrNotHeld)
	}
	return Info{
		Lease:      Lease{FencingToken: g.fence, TTL: remaining, ExpiresAt: g.expiresAt},
		Subject:    g.subject,
		Owner:      g.owner,
		AcquiredAt: g.acquiredAt,
	}, nil
}

// Check implements Backend: memory is always reachable.
func (m *Memory) Check(context.Context) error { return nil }

// Close implements Backend. Locks held stay held until their leases end.
func (m *Memory) Close() error { return nil }
