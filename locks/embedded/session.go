package embedded

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// memSessions is the embedded backend's store of sessions: the same
// steps as lua/session_*.lua, under one mutex of its own (a step never
// touches a lock, as on Redis Cluster, where a session and a lock live on
// different slots).
type memSessions struct {
	mu   sync.Mutex
	byID map[string]*memSession
	// pruneAt is the size at which the next open sweeps out the sessions
	// that ended.
	pruneAt int
}

// memSession is one session, live or ended.
type memSession struct {
	tokHash, subject string
	ttl              time.Duration
	expiresAt        time.Time
	// ended: EndSession ended it; it is kept until expiresAt, for a
	// repeated end.
	ended   bool
	members map[string]locks.SessionMember
	// pendingUntil is each pending member's deadline, by nonce: past it,
	// its acquire is taken for dead (see locks.SessionStore.Join).
	pendingUntil map[string]time.Time
}

// forgetDeadLocked forgets the pending members past their deadline. The
// store's mutex must be held.
func (ss *memSession) forgetDeadLocked(now time.Time) {
	for n, until := range ss.pendingUntil {
		if now.Before(until) {
			continue
		}
		delete(ss.pendingUntil, n)
		if ss.members[n].Pending {
			delete(ss.members, n)
		}
	}
}

var _ locks.SessionStore = (*memSessions)(nil)

// memSessionCount counts each subject's live sessions (locks.SessionCounter):
// their ends, by session id.
type memSessionCount struct {
	mu        sync.Mutex
	bySubject map[string]map[string]time.Time
}

var _ locks.SessionCounter = (*memSessionCount)(nil)

func (n *memSessionCount) Add(_ context.Context, subject, id string, ttl time.Duration, max int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	ends := n.bySubject[subject]
	for other, end := range ends {
		if !now.Before(end) {
			delete(ends, other)
		}
	}
	if _, ok := ends[id]; !ok && len(ends) >= max {
		return locks.ErrTooManySessions
	}
	if ends == nil {
		if n.bySubject == nil {
			n.bySubject = map[string]map[string]time.Time{}
		}
		ends = map[string]time.Time{}
		n.bySubject[subject] = ends
	}
	ends[id] = now.Add(ttl)
	return nil
}

func (n *memSessionCount) Extend(_ context.Context, subject, id string, ttl time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ends := n.bySubject[subject]; ends != nil {
		if _, ok := ends[id]; ok {
			ends[id] = time.Now().Add(ttl)
		}
	}
	return nil
}

func (n *memSessionCount) Remove(_ context.Context, subject, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ends := n.bySubject[subject]; ends != nil {
		delete(ends, id)
		if len(ends) == 0 {
			delete(n.bySubject, subject)
		}
	}
	return nil
}

func (n *memSessionCount) Live(_ context.Context, subject string) ([]locks.SessionSummary, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	out := []locks.SessionSummary{}
	for id, end := range n.bySubject[subject] {
		if now.Before(end) {
			out = append(out, locks.SessionSummary{ID: id, ExpiresAt: end})
		}
	}
	return out, nil
}

// checkLocked finds the caller's live session. s.mu must be held.
func (s *memSessions) checkLocked(c locks.SessionCaller, now time.Time) (*memSession, error) {
	ss := s.byID[c.ID]
	switch {
	case ss == nil || !now.Before(ss.expiresAt):
		return nil, locks.ErrSessionEnded
	case ss.tokHash != c.TokHash || ss.subject != c.Subject:
		return nil, locks.ErrSessionNotYours
	case ss.ended:
		return ss, locks.ErrSessionEnded
	}
	return ss, nil
}

func (s *memSessions) Open(_ context.Context, c locks.SessionCaller, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]*memSession{}
	}
	now := time.Now()
	if len(s.byID) >= s.pruneAt {
		for id, ss := range s.byID {
			if !now.Before(ss.expiresAt) {
				delete(s.byID, id)
			}
		}
		s.pruneAt = 2*len(s.byID) + 64
	}
	s.byID[c.ID] = &memSession{tokHash: c.TokHash, subject: c.Subject, ttl: ttl,
		expiresAt: now.Add(ttl), members: map[string]locks.SessionMember{}, pendingUntil: map[string]time.Time{}}
	return nil
}

func (s *memSessions) Join(_ context.Context, c locks.SessionCaller, m locks.SessionMember, maxHolds int, pendingFor time.Duration) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, locks.SessionError("join", c, err)
	}
	if len(ss.members) >= maxHolds {
		ss.forgetDeadLocked(now)
		if len(ss.members) >= maxHolds {
			return 0, locks.SessionError("join", c, locks.ErrSessionFull)
		}
	}
	ss.members[m.Nonce] = m
	ss.pendingUntil[m.Nonce] = now.Add(pendingFor)
	return ss.expiresAt.Sub(now), nil
}

func (s *memSessions) Confirm(_ context.Context, c locks.SessionCaller, m locks.SessionMember) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, locks.SessionError("join", c, err)
	}
	m.Pending = false
	ss.members[m.Nonce] = m
	delete(ss.pendingUntil, m.Nonce)
	return ss.expiresAt.Sub(now), nil
}

func (s *memSessions) Keep(_ context.Context, c locks.SessionCaller, ttl time.Duration) (time.Duration, []locks.SessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, nil, locks.SessionError("keep", c, err)
	}
	if ttl > 0 {
		ss.ttl = ttl
	}
	ss.expiresAt = now.Add(ss.ttl)
	ss.forgetDeadLocked(now)
	var ms []locks.SessionMember
	for _, m := range ss.members {
		if !m.Pending {
			ms = append(ms, m)
		}
	}
	return ss.ttl, ms, nil
}

func (s *memSessions) Drop(_ context.Context, c locks.SessionCaller, nonces []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, err := s.checkLocked(c, time.Now()); err == nil {
		for _, n := range nonces {
			delete(ss.members, n)
			delete(ss.pendingUntil, n)
		}
	}
	return nil
}

func (s *memSessions) End(_ context.Context, c locks.SessionCaller) ([]locks.SessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if ss != nil && ss.ended {
		return nil, nil // a repeated end
	}
	if err != nil {
		return nil, locks.SessionError("end", c, err)
	}
	ms := slices.Collect(maps.Values(ss.members))
	ss.ended, ss.members, ss.pendingUntil, ss.expiresAt = true, nil, nil, now.Add(locks.RecordTTL)
	return ms, nil
}

func (s *memSessions) Describe(_ context.Context, c locks.SessionCaller) (time.Duration, time.Duration, []locks.SessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, 0, nil, locks.SessionError("describe", c, err)
	}
	ss.forgetDeadLocked(now)
	return ss.expiresAt.Sub(now), ss.ttl, slices.Collect(maps.Values(ss.members)), nil
}

// ReleaseEnded implements sessionGrants.
func (m *Backend) ReleaseEnded(ctx context.Context, h locks.SessionHold, token, sessionID string) (locks.Released, error) {
	if h.Semaphore {
		return m.ReleasePermit(ctx, h.Key, token)
	}
	return m.releaseHold(h.Key, token, allHolds, sessionID)
}

// RenewMember implements the session engine's grants.
func (m *Backend) RenewMember(_ context.Context, h locks.SessionHold, token string, ttl time.Duration) (locks.Lease, error) {
	if h.Semaphore {
		return m.renewPermit(h.Key, token, ttl)
	}
	return m.renew(h.Key, token, ttl)
}
