package redisbackend

import (
	"context"

	"github.com/lockgate/lockgate/locks"
)

// History implements Historian. The scripts write the events under the
// lock's hash tag as they change the lock (see lua/lib_history.lua event).
func (r *Backend) History(ctx context.Context, key locks.Key) ([]locks.Event, error) {
	if r.opts.History <= 0 {
		return nil, nil
	}
	events, err := r.callHistory(ctx, key)
	if err != nil {
		return nil, locks.Unavailable("history", resource{lockKind, key}, err)
	}
	return events, nil
}
