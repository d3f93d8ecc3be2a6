package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// AcquireAll implements allAtOnce: under the backend's one mutex, every
// lock is looked at before any is granted.
func (m *Backend) AcquireAll(ctx context.Context, keys []locks.Key, owners []string, req locks.AcquireRequest) ([]locks.Lease, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, k := range keys {
		m.expireLocked(k, now)
		until, delayed := m.delayedLocked(k, now)
		if m.locks[k] == nil && !delayed {
			m.handOnLocked(k, now) // a free lock goes to its queue first
		}
		var retry time.Duration
		switch l := m.locks[k]; {
		case l != nil:
			retry = l.until().Sub(now)
		case delayed:
			retry = until.Sub(now)
		case len(m.queues[k]) > 0:
		default:
			continue
		}
		return nil, true, fmt.Errorf("acquire set: %s: %w", k, &locks.HeldError{RetryAfter: max(retry, 0)})
	}
	if ctx.Err() != nil {
		return nil, true, fmt.Errorf("acquire set: %w", ctx.Err())
	}
	leases := make([]locks.Lease, len(keys))
	for i, k := range keys {
		leases[i] = m.grantLocked(k, &memWaiter{token: owners[i], req: req}, now, "acquired").Lease
	}
	return leases, true, nil
}
