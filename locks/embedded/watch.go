package embedded

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// Watch implements Watcher: each event the history records wakes the
// watchers of its lock (see recordLocked).
func (m *Backend) Watch(ctx context.Context, key locks.Key, after int64) (locks.Change, error) {
	if m.opts.History <= 0 {
		return locks.Change{}, locks.ErrWatchesOff
	}
	for {
		m.mu.Lock()
		now := time.Now()
		m.expireLocked(key, now)
		var index int64
		var kept []locks.Event
		first := true
		if h := m.histories[key]; h != nil {
			index, kept, first = h.index, h.events, h.first()
		}
		var info locks.Info
		l := m.locks[key]
		if l != nil {
			info = m.infoLocked(key, l, now)
			info.QueuePriorities = queuePriorities(m.queues[key])
		}
		c := locks.ChangeAfter(after, index, kept, first, l != nil, info)
		c.Events = append([]locks.Event(nil), c.Events...)
		if index != after || after < 0 || ctx.Err() != nil {
			m.mu.Unlock()
			return c, ctx.Err()
		}
		changed := m.watched[key]
		if changed == nil {
			changed = make(chan struct{})
			m.watched[key] = changed
		}
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}
