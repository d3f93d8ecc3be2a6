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
	queues    map[Key][]*memWaiter // FIFO; a lock with waiters is never free
	sems      map[Key]*memSemaphore
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
	expiry     *time.Timer // ends the grant at expiresAt
	holds      int         // re-entrant holds; 1 for a new grant
}

// memWaiter is a caller waiting in a lock's queue.
type memWaiter struct {
	token  string
	req    AcquireRequest
	handed chan Grant // receives the grant when the lock is handed over
	grant  *Grant     // set, under mu, when handed over
}

// NewMemory returns an empty embedded backend.
func NewMemory() *Memory {
	return &Memory{locks: make(map[Key]*memGrant), queues: make(map[Key][]*memWaiter), sems: make(map[Key]*memSemaphore)}
}

// Acquire implements Locker.
func (m *Memory) Acquire(ctx context.Context, key Key, req AcquireRequest) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	token := newToken()
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	for {
		w := &memWaiter{token: token, req: req, handed: make(chan Grant, 1)}
		grant, remaining, queued := m.tryAcquire(key, w)
		if !queued {
			if remaining > 0 {
				return Grant{}, &HeldError{RetryAfter: remaining}
			}
			return m.deliver(ctx, key, grant)
		}
		select {
		case g := <-w.handed:
			if g = handedOver(g); g.TTL > 0 {
				return m.deliver(ctx, key, g)
			}
			// The lease ran out before this goroutine ran: never hand out a
			// dead lease; queue again.
		case <-deadline.C:
			if g, handed := m.leave(key, w); handed {
				if g = handedOver(g); g.TTL > 0 {
					return m.deliver(ctx, key, g) // handed over as the wait ran out
				}
			}
			return m.heldError(key)
		case <-ctx.Done():
			if g, handed := m.leave(key, w); handed {
				m.Release(context.WithoutCancel(ctx), key, g.Token)
			}
			return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
		}
	}
}

// handedOver describes a grant handed to a waiter as it stands now: its
// TTL is what remains of the lease, as the Redis backend reports it.
func handedOver(g Grant) Grant {
	now := time.Now()
	g.HandoffDelay = now.Sub(g.ExpiresAt.Add(-g.TTL))
	g.TTL = g.ExpiresAt.Sub(now)
	return g
}

// deliver hands g to the caller, unless the caller has left: then nobody
// would ever release it, so it is released at once.
func (m *Memory) deliver(ctx context.Context, key Key, g Grant) (Grant, error) {
	if ctx.Err() != nil {
		m.Release(context.WithoutCancel(ctx), key, g.Token)
		return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
	}
	return g, nil
}

// tryAcquire grants the lock to w if it is free. If it is held, a waiting w
// joins the queue (queued) and otherwise the holder's remaining TTL is
// returned.
func (m *Memory) tryAcquire(key Key, w *memWaiter) (g Grant, remaining time.Duration, queued bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	if g := m.locks[key]; g != nil {
		if w.req.Wait > 0 {
			m.queues[key] = append(m.queues[key], w)
			return Grant{}, 0, true
		}
		return Grant{}, g.expiresAt.Sub(now), false
	}
	return m.grantLocked(key, w, now), 0, false
}

// grantLocked makes w the holder of the free lock key. m.mu must be held.
func (m *Memory) grantLocked(key Key, w *memWaiter, now time.Time) Grant {
	g := m.newGrantLocked(w, now, func() { m.expireLocked(key, time.Now()) })
	m.locks[key] = g
	return g.grant(w.token)
}

// newGrantLocked makes a grant for w, whose lease calls expire, under
// m.mu, when it runs out. m.mu must be held.
func (m *Memory) newGrantLocked(w *memWaiter, now time.Time, expire func()) *memGrant {
	g := &memGrant{
		tokenHash:  tokenHash(w.token),
		fence:      m.nextFence(now),
		subject:    w.req.Subject,
		owner:      w.req.Owner,
		acquiredAt: now,
		ttl:        w.req.TTL,
		expiresAt:  now.Add(w.req.TTL),
		holds:      1,
	}
	g.expiry = time.AfterFunc(w.req.TTL, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		expire()
	})
	return g
}

// grant describes g to its holder.
func (g *memGrant) grant(token string) Grant {
	return Grant{Token: token, Holds: g.holds, Lease: Lease{FencingToken: g.fence, TTL: g.ttl, ExpiresAt: g.expiresAt}}
}

// nextFence keeps fencing tokens increasing across restarts: a new process
// starts from the wall clock in microseconds, which is past every token an
// earlier process handed out unless it granted more than one lock per
// microsecond on average, or the clock went back.
func (m *Memory) nextFence(now time.Time) int64 {
	m.lastFence = max(m.lastFence+1, now.UnixMicro())
	return m.lastFence
}

// expireLocked ends the grant of key if its lease has run out. A timer that
// fires just before a renewal finds a later expiry and does nothing. m.mu
// must be held.
func (m *Memory) expireLocked(key Key, now time.Time) {
	if g := m.locks[key]; g != nil && !now.Before(g.expiresAt) {
		m.endLocked(key, g, now)
	}
}

// endLocked ends g and hands the lock to the first waiter. m.mu must be held.
func (m *Memory) endLocked(key Key, g *memGrant, now time.Time) {
	g.expiry.Stop()
	delete(m.locks, key)
	q := m.queues[key]
	if len(q) == 0 {
		return
	}
	w := q[0]
	q[0] = nil
	if len(q) == 1 {
		delete(m.queues, key)
	} else {
		m.queues[key] = q[1:]
	}
	grant := m.grantLocked(key, w, now)
	w.grant = &grant
	w.handed <- grant
}

// leave takes w out of the queue. If the lock was handed to w first, it
// returns that grant.
func (m *Memory) leave(key Key, w *memWaiter) (Grant, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.grant != nil {
		return *w.grant, true
	}
	q := m.queues[key]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(m.queues, key)
	} else {
		m.queues[key] = q
	}
	return Grant{}, false
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

// holder returns the live grant that token holds, or nil. m.mu must be held.
func (m *Memory) holder(key Key, token string) *memGrant {
	m.expireLocked(key, time.Now())
	g := m.locks[key]
	if g == nil || g.tokenHash != tokenHash(token) {
		return nil
	}
	return g
}

// Release implements Locker.
func (m *Memory) Release(ctx context.Context, key Key, token string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.holder(key, token)
	if g == nil {
		return 0, fmt.Errorf("release %s: %w", key, ErrNotHolder)
	}
	if g.holds > 1 {
		g.holds--
		return g.holds, nil
	}
	now := time.Now()
	m.endLocked(key, g, now)
	releaseEnded(ctx, now.Sub(g.acquiredAt))
	return 0, nil
}

// Reenter implements Locker.
func (m *Memory) Reenter(_ context.Context, key Key, token string, ttl time.Duration) (Grant, error) {
	if ttl < time.Millisecond {
		return Grant{}, fmt.Errorf("%w: ttl must be at least 1ms", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.holder(key, token)
	if g == nil {
		return Grant{}, fmt.Errorf("re-enter %s: %w", key, ErrNotHolder)
	}
	g.holds++
	now := time.Now()
	if until := now.Add(ttl); until.After(g.expiresAt) {
		g.expiresAt = until
		g.expiry.Reset(ttl)
	}
	return Grant{Token: token, Holds: g.holds,
		Lease: Lease{FencingToken: g.fence, TTL: g.expiresAt.Sub(now), ExpiresAt: g.expiresAt}}, nil
}

// Renew implements Locker.
func (m *Memory) Renew(_ context.Context, key Key, token string, ttl time.Duration) (Lease, error) {
	if err := validateRenewTTL(ttl); err != nil {
		return Lease{}, err
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
	now := time.Now()
	m.expireLocked(key, now)
	g := m.locks[key]
	if g == nil {
		return Info{}, fmt.Errorf("inspect %s: %w", key, ErrNotHeld)
	}
	return Info{
		Lease:      Lease{FencingToken: g.fence, TTL: g.expiresAt.Sub(now), ExpiresAt: g.expiresAt},
		Subject:    g.subject,
		Owner:      g.owner,
		AcquiredAt: g.acquiredAt,
		Waiters:    len(m.queues[key]),
		Holds:      g.holds,
	}, nil
}

// Check implements Backend: memory is always reachable.
func (m *Memory) Check(context.Context) error { return nil }

// Close implements Backend. Locks held stay held until their leases end.
func (m *Memory) Close() error { return nil }
