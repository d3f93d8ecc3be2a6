package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// Break implements Breaker.
func (m *Backend) Break(_ context.Context, key locks.Key, by string, period time.Duration) (locks.Broken, error) {
	if err := locks.ValidBreakPeriod(period); err != nil {
		return locks.Broken{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	l := m.locks[key]
	if _, ok := m.restingLocked(key, now); ok && l == nil {
		// No grant, but a released one's min hold: the break ends it, and
		// the lock goes on.
		delete(m.resting, key)
		delete(m.delayed, key)
		m.handOnLocked(key, now)
		return locks.Broken{}, nil
	}
	if l == nil {
		return locks.Broken{}, fmt.Errorf("break %s: %w", key, locks.ErrNotHeld)
	}
	n, ended, left := len(l.holders), false, time.Duration(0)
	for h, g := range l.holders {
		// Its end under this break: the least of its lease (which an
		// earlier break capped already) and the period from now.
		end := now
		if period > 0 {
			end = g.expiresAt
			if p := now.Add(period); p.Before(end) {
				end = p
			}
		}
		if end.After(now) {
			if g.breakBy == "" || end.Before(g.breakEnd) {
				g.breakBy, g.breakEnd = by, end
			}
			g.expiresAt = end
			g.expiry.Reset(end.Sub(now))
			m.noteLocked(g, false, now)
			g.keepIdem()
			left = max(left, end.Sub(now))
			continue
		}
		ended = true
		g.expiry.Stop()
		m.records[g.tokenSum] = memRecord{broken: true, until: now.Add(locks.RecordTTL).UnixNano()}
		m.recordLocked(key, locks.Event{Kind: "broken", At: now.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence, By: by})
		delete(l.holders, h)
	}
	if ended {
		m.freedLocked(key, l, now)
	}
	return locks.Broken{Grants: n, Left: left}, nil
}
