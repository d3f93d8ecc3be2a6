package locks

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
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
	members map[string]sessionMember
}

var _ sessionStore = (*memSessions)(nil)

// checkLocked finds the caller's live session. s.mu must be held.
func (s *memSessions) checkLocked(c sessionCaller, now time.Time) (*memSession, error) {
	ss := s.byID[c.id]
	switch {
	case ss == nil || !now.Before(ss.expiresAt):
		return nil, ErrSessionEnded
	case ss.tokHash != c.tokHash || ss.subject != c.subject:
		return nil, ErrSessionNotYours
	case ss.ended:
		return ss, ErrSessionEnded
	}
	return ss, nil
}

func (s *memSessions) open(_ context.Context, c sessionCaller, ttl time.Duration) error {
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
	s.byID[c.id] = &memSession{tokHash: c.tokHash, subject: c.subject, ttl: ttl,
		expiresAt: now.Add(ttl), members: map[string]sessionMember{}}
	return nil
}

func (s *memSessions) join(_ context.Context, c sessionCaller, m sessionMember, maxHolds int) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, sessionError("join", c, err)
	}
	if len(ss.members) >= maxHolds {
		return 0, sessionError("join", c, ErrSessionFull)
	}
	ss.members[m.nonce] = m
	return ss.expiresAt.Sub(now), nil
}

func (s *memSessions) confirm(_ context.Context, c sessionCaller, m sessionMember) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, sessionError("join", c, err)
	}
	m.pending = false
	ss.members[m.nonce] = m
	return ss.expiresAt.Sub(now), nil
}

func (s *memSessions) keep(_ context.Context, c sessionCaller, ttl time.Duration) (time.Duration, []sessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, nil, sessionError("keep", c, err)
	}
	if ttl > 0 {
		ss.ttl = ttl
	}
	ss.expiresAt = now.Add(ss.ttl)
	var ms []sessionMember
	for _, m := range ss.members {
		if !m.pending {
			ms = append(ms, m)
		}
	}
	return ss.ttl, ms, nil
}

func (s *memSessions) drop(_ context.Context, c sessionCaller, nonces []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, err := s.checkLocked(c, time.Now()); err == nil {
		for _, n := range nonces {
			delete(ss.members, n)
		}
	}
	return nil
}

func (s *memSessions) end(_ context.Context, c sessionCaller) ([]sessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if ss != nil && ss.ended {
		return nil, nil // a repeated end
	}
	if err != nil {
		return nil, sessionError("end", c, err)
	}
	ms := slices.Collect(maps.Values(ss.members))
	ss.ended, ss.members, ss.expiresAt = true, nil, now.Add(RecordTTL)
	return ms, nil
}

func (s *memSessions) describe(_ context.Context, c sessionCaller) (time.Duration, time.Duration, []sessionMember, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ss, err := s.checkLocked(c, now)
	if err != nil {
		return 0, 0, nil, sessionError("describe", c, err)
	}
	return ss.expiresAt.Sub(now), ss.ttl, slices.Collect(maps.Values(ss.members)), nil
}

// releaseEnded implements sessionGrants.
func (m *Memory) releaseEnded(ctx context.Context, h SessionHold, token, sessionID string) (Released, error) {
	if h.Semaphore {
		return m.ReleasePermit(ctx, h.Key, token)
	}
	return m.releaseHold(h.Key, token, BaseHold, sessionID)
}
