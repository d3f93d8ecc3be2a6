package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// memSemaphore is one semaphore of the embedded backend.
type memSemaphore struct {
	limit   int
	holders map[tokenSum]*memGrant
	queue   []*memWaiter // by rank (see byRank)
}

var _ locks.Semaphores = (*Backend)(nil)

// AcquirePermit implements Semaphores.
func (m *Backend) AcquirePermit(ctx context.Context, key locks.Key, req locks.SemaphoreRequest) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	return m.await(ctx, memPermits{m, req.Limit}, key, req.AcquireRequest)
}

// memPermits is the memQueue of a semaphore's permits, for callers who ask
// with limit.
type memPermits struct {
	m     *Backend
	limit int
}

func (q memPermits) try(key locks.Key, w *memWaiter) (locks.Grant, bool, error) {
	return q.m.tryPermit(key, w, q.limit)
}

func (q memPermits) leave(key locks.Key, w *memWaiter) (locks.Grant, bool) {
	return q.m.leavePermit(key, w)
}
func (q memPermits) refusal(key locks.Key) error {
	q.m.mu.Lock()
	defer q.m.mu.Unlock()
	var retry time.Duration
	if s := q.m.sems[key]; s != nil {
		retry = s.soonest(time.Now())
	}
	return &locks.FullError{RetryAfter: retry}
}
func (q memPermits) release(ctx context.Context, key locks.Key, token string) {
	q.m.ReleasePermit(ctx, key, token)
}
func (memPermits) what() string { return "semaphore " }

// tryPermit gives w a permit if one is free and nobody waits; otherwise a
// waiting w joins the queue (queued), and one that does not wait gets a
// *FullError.
func (m *Backend) tryPermit(key locks.Key, w *memWaiter, limit int) (g locks.Grant, queued bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	s := m.sems[key]
	if s == nil {
		s = &memSemaphore{limit: limit, holders: make(map[tokenSum]*memGrant)}
		m.sems[key] = s
	}
	m.expirePermitsLocked(key, s, now)
	m.sems[key] = s // the expiry forgets a semaphore that became idle
	if s.limit != limit {
		if len(s.holders) > 0 || len(s.queue) > 0 {
			return locks.Grant{}, false, fmt.Errorf("acquire semaphore %s: %w", key, &locks.LimitMismatchError{Limit: s.limit})
		}
		s.limit = limit // idle: the new limit applies
	}
	if len(s.holders) < s.limit && len(s.queue) == 0 {
		return m.grantPermitLocked(key, s, w, now), false, nil
	}
	if w.req.Wait == 0 {
		return locks.Grant{}, false, &locks.FullError{RetryAfter: s.soonest(now)}
	}
	s.queue = byRank(s.queue, w)
	return locks.Grant{}, true, nil
}

func (m *Backend) grantPermitLocked(key locks.Key, s *memSemaphore, w *memWaiter, now time.Time) locks.Grant {
	g := m.newGrantLocked(w, now, func() {
		if s := m.sems[key]; s != nil {
			m.expirePermitsLocked(key, s, time.Now())
		}
	})
	s.holders[g.tokenSum] = g
	return g.grant(w.token)
}

// soonest is the time until the first lease of s ends.
func (s *memSemaphore) soonest(now time.Time) time.Duration {
	var first time.Duration
	for _, g := range s.holders {
		if d := g.expiresAt.Sub(now); first == 0 || d < first {
			first = d
		}
	}
	return max(first, 0)
}

// expirePermitsLocked ends the permits of s whose lease ran out, and hands
// them on. m.mu must be held.
func (m *Backend) expirePermitsLocked(key locks.Key, s *memSemaphore, now time.Time) {
	for hash, g := range s.holders {
		if !now.Before(g.expiresAt) {
			g.expiry.Stop()
			delete(s.holders, hash)
		}
	}
	m.handoffPermitsLocked(key, s, now)
}

// handoffPermitsLocked gives free permits to the waiters at the head of
// the queue, and forgets a semaphore nobody uses. m.mu must be held.
func (m *Backend) handoffPermitsLocked(key locks.Key, s *memSemaphore, now time.Time) {
	for len(s.holders) < s.limit && len(s.queue) > 0 {
		w := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		g := m.grantPermitLocked(key, s, w, now)
		w.grant = &g
		w.handed <- g
	}
	if len(s.holders) == 0 && len(s.queue) == 0 && m.sems[key] == s {
		delete(m.sems, key)
	}
}

// leavePermit takes w out of the queue. If a permit was handed to w first,
// it returns it.
func (m *Backend) leavePermit(key locks.Key, w *memWaiter) (locks.Grant, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.grant != nil {
		return *w.grant, true
	}
	s := m.sems[key]
	if s == nil {
		return locks.Grant{}, false
	}
	s.queue = slices.DeleteFunc(s.queue, func(x *memWaiter) bool { return x == w })
	m.handoffPermitsLocked(key, s, time.Now()) // our place may have held others back
	return locks.Grant{}, false
}

// permitLocked returns the live permit token holds, or nil. m.mu must be
// held.
func (m *Backend) permitLocked(key locks.Key, token string) (*memSemaphore, *memGrant) {
	s := m.sems[key]
	if s == nil {
		return nil, nil
	}
	m.expirePermitsLocked(key, s, time.Now())
	return s, s.holders[sumOf(token)]
}

// ReleasePermit implements Semaphores.
func (m *Backend) ReleasePermit(_ context.Context, key locks.Key, token string) (locks.Released, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, g := m.permitLocked(key, token)
	now := time.Now()
	if g == nil {
		reason := m.whyLocked(token, now)
		if reason == locks.ReasonReleased {
			return locks.Released{}, nil // released already: a repeated release changes nothing
		}
		return locks.Released{}, fmt.Errorf("release semaphore %s: %w", key, &locks.NotHolderError{Reason: reason})
	}
	g.expiry.Stop()
	m.noteLocked(g, true, now)
	delete(s.holders, g.tokenSum)
	m.handoffPermitsLocked(key, s, now)
	return locks.EndedAfter(now.Sub(g.acquiredAt)), nil
}

// RenewPermit implements Semaphores.
func (m *Backend) RenewPermit(_ context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if locks.IsSessionGrant(token) {
		return locks.Lease{}, fmt.Errorf("renew semaphore %s: %w", key, locks.ErrSessionGrantRenew)
	}
	return m.renewPermit(key, token, ttl)
}

// renewPermit is RenewPermit, for a session's permit too (RenewMember).
func (m *Backend) renewPermit(key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.ValidateRenewTTL(ttl); err != nil {
		return locks.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, g := m.permitLocked(key, token)
	now := time.Now()
	if g == nil {
		return locks.Lease{}, fmt.Errorf("renew semaphore %s: %w", key, &locks.NotHolderError{Reason: m.whyLocked(token, now)})
	}
	return m.renewLocked(g, ttl, now), nil
}

// InspectSemaphore implements Semaphores.
func (m *Backend) InspectSemaphore(_ context.Context, key locks.Key) (locks.SemaphoreInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	s := m.sems[key]
	if s != nil {
		m.expirePermitsLocked(key, s, now)
	}
	if s == nil || len(s.holders) == 0 {
		return locks.SemaphoreInfo{}, fmt.Errorf("inspect semaphore %s: %w", key, locks.ErrNotHeld)
	}
	info := locks.SemaphoreInfo{Limit: s.limit, Waiters: len(s.queue), QueuePriorities: queuePriorities(s.queue)}
	for _, g := range s.holders {
		info.Holders = append(info.Holders, locks.Holder{Holds: 1,
			Lease:   g.lease(g.expiresAt.Sub(now)),
			Subject: g.subject, Owner: g.owner, AcquiredAt: g.acquiredAt,
		})
	}
	slices.SortFunc(info.Holders, func(a, b locks.Holder) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return info, nil
}

// ResizeSemaphore implements Semaphores.
func (m *Backend) ResizeSemaphore(_ context.Context, key locks.Key, limit int) (locks.SemaphoreSize, error) {
	if err := locks.ValidateLimit(limit); err != nil {
		return locks.SemaphoreSize{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	s := m.sems[key]
	if s != nil {
		m.expirePermitsLocked(key, s, now) // forgets s if it became idle
	}
	if s == nil || m.sems[key] != s {
		return locks.SemaphoreSize{}, fmt.Errorf("resize semaphore %s: %w", key, locks.ErrNotHeld)
	}
	s.limit = limit
	m.handoffPermitsLocked(key, s, now)
	return locks.SemaphoreSize{Limit: s.limit, Holders: len(s.holders), Waiters: len(s.queue)}, nil
}
