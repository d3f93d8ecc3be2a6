package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// memSemaphore is one semaphore of the embedded backend. It outlives its
// last use by historyKeep, idle (no holder, no waiter), for its index.
type memSemaphore struct {
	limit   int
	holders map[tokenSum]*memGrant
	queue   []*memWaiter // by rank (see byRank)
	// index is its index (see locks.SemaphoreWatch), 0 before its first
	// change; last is when that was.
	index int64
	last  time.Time
}

// idle reports whether nobody holds or waits for a permit of s: it keeps
// no limit then (the next acquire's applies).
func (s *memSemaphore) idle() bool { return len(s.holders) == 0 && len(s.queue) == 0 }

// changedLocked moves the index of key's semaphore s on by n changes (its
// first from the clock, above every index of a semaphore forgotten), and
// wakes its watchers. m.mu must be held.
func (m *Backend) changedLocked(key locks.Key, s *memSemaphore, n int, now time.Time) {
	if n == 0 {
		return
	}
	if s.index == 0 {
		s.index = max(now.UnixMicro(), m.semForgotten+1) - 1
	}
	s.index += int64(n)
	s.last = now
	if w := m.semWatched[key]; w != nil {
		close(w)
		delete(m.semWatched, key)
	}
}

// pruneSemaphoresLocked forgets the semaphores idle for historyKeep, as
// the Redis backend's record of one lives the fence retention. m.mu must
// be held.
func (m *Backend) pruneSemaphoresLocked(now time.Time) {
	for key, s := range m.sems {
		if s.idle() && now.Sub(s.last) >= historyKeep {
			m.semForgotten = max(m.semForgotten, s.index)
			delete(m.sems, key)
		}
	}
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
		s = &memSemaphore{limit: limit, holders: make(map[tokenSum]*memGrant), last: now}
		m.sems[key] = s
	}
	m.expirePermitsLocked(key, s, now)
	if s.limit != limit {
		if !s.idle() {
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
	m.changedLocked(key, s, 1, now)
	return locks.Grant{}, true, nil
}

func (m *Backend) grantPermitLocked(key locks.Key, s *memSemaphore, w *memWaiter, now time.Time) locks.Grant {
	g := m.newGrantLocked(w, now, func() {
		if s := m.sems[key]; s != nil {
			m.expirePermitsLocked(key, s, time.Now())
		}
	})
	s.holders[g.tokenSum] = g
	m.changedLocked(key, s, 1, now)
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
	ended := 0
	for hash, g := range s.holders {
		if !now.Before(g.expiresAt) {
			g.expiry.Stop()
			delete(s.holders, hash)
			ended++
		}
	}
	m.changedLocked(key, s, ended, now)
	m.handoffPermitsLocked(key, s, now)
}

// handoffPermitsLocked gives free permits to the waiters at the head of
// the queue. m.mu must be held.
func (m *Backend) handoffPermitsLocked(key locks.Key, s *memSemaphore, now time.Time) {
	for len(s.holders) < s.limit && len(s.queue) > 0 {
		w := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		g := m.grantPermitLocked(key, s, w, now)
		w.grant = &g
		w.handed <- g
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
	now := time.Now()
	n := len(s.queue)
	s.queue = slices.DeleteFunc(s.queue, func(x *memWaiter) bool { return x == w })
	m.changedLocked(key, s, n-len(s.queue), now)
	m.handoffPermitsLocked(key, s, now) // our place may have held others back
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
	m.changedLocked(key, s, 1, now)
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
	s, g := m.permitLocked(key, token)
	now := time.Now()
	if g == nil {
		return locks.Lease{}, fmt.Errorf("renew semaphore %s: %w", key, &locks.NotHolderError{Reason: m.whyLocked(token, now)})
	}
	m.changedLocked(key, s, 1, now) // a new end of its lease
	return m.renewLocked(g, ttl, now), nil
}

// InspectSemaphore implements Semaphores.
func (m *Backend) InspectSemaphore(_ context.Context, key locks.Key) (locks.SemaphoreInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.semaphoreLocked(key, time.Now())
	if !w.Held {
		return locks.SemaphoreInfo{}, fmt.Errorf("inspect semaphore %s: %w", key, &locks.NotHeldError{Key: key, Index: w.Index})
	}
	return w.Info, nil
}

// WatchSemaphore implements Semaphores: each change of the semaphore wakes
// its watchers (see changedLocked).
func (m *Backend) WatchSemaphore(ctx context.Context, key locks.Key, after int64) (locks.SemaphoreWatch, error) {
	for {
		m.mu.Lock()
		w := m.semaphoreLocked(key, time.Now())
		if w.Index != after || after < 0 || ctx.Err() != nil {
			m.mu.Unlock()
			return w, ctx.Err()
		}
		changed := m.semWatched[key]
		if changed == nil {
			changed = make(chan struct{})
			m.semWatched[key] = changed
		}
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// semaphoreLocked is key's semaphore now, its expired permits ended.
// m.mu must be held.
func (m *Backend) semaphoreLocked(key locks.Key, now time.Time) locks.SemaphoreWatch {
	s := m.sems[key]
	if s == nil {
		return locks.SemaphoreWatch{}
	}
	m.expirePermitsLocked(key, s, now)
	if len(s.holders) == 0 {
		return locks.SemaphoreWatch{Index: s.index, Info: locks.SemaphoreInfo{Index: s.index}}
	}
	info := locks.SemaphoreInfo{Index: s.index, Limit: s.limit, Waiters: len(s.queue), QueuePriorities: queuePriorities(s.queue)}
	for _, g := range s.holders {
		info.Holders = append(info.Holders, locks.Holder{Holds: 1,
			Lease:   g.lease(g.expiresAt.Sub(now)),
			Subject: g.subject, Owner: g.owner, AcquiredAt: g.acquiredAt,
		})
	}
	slices.SortFunc(info.Holders, func(a, b locks.Holder) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return locks.SemaphoreWatch{Index: s.index, Held: true, Info: info}
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
		m.expirePermitsLocked(key, s, now)
	}
	if s == nil || s.idle() {
		return locks.SemaphoreSize{}, fmt.Errorf("resize semaphore %s: %w", key, locks.ErrNotHeld)
	}
	if s.limit != limit {
		s.limit = limit
		m.changedLocked(key, s, 1, now)
	}
	m.handoffPermitsLocked(key, s, now)
	return locks.SemaphoreSize{Limit: s.limit, Holders: len(s.holders), Waiters: len(s.queue)}, nil
}
