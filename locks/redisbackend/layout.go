package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/locks"
)

// layoutVersion names the Redis layout this gateway reads and writes
// (lua/lib_keys.lua), kept under Options.Prefix + "layout". A gateway that
// starts on a Redis whose layout it does not know must not run beside the
// gateways that wrote it: it could ignore their live locks. It goes up when
// a change means that; a change that an older gateway's data still reads
// right (it carries the old state over) moves it too, with a step in
// CheckLayout that carries it.
//
//	1  until #36: no layout key. Call records for every script.
//	2  #36: the acquire and the release keyed by their ids, no call
//	   records ('h<handed>:<call id>', 'r<held>:<call id>', 'f' records;
//	   later 'r<made at>:<call id>', as the release reads no clock; an
//	   older gateway of 3 reads that as a time held, so a re-sent
//	   release it answers has a wrong Held, a metric, and nothing else);
//	   the namespace index lists names, and the name record carries
//	   until when its name is listed. A lock's hash and its queue are as
//	   in 1, and 2 reads a name record or index entry of 1, so a live lock
//	   of 1 is read as it was: 2 carries 1 over with nothing to do.
//	3  #36: the namespace index is a directory of packed buckets of
//	   names (lua/lib_index.lua), not two sorted sets; every live entry
//	   of 1 and 2 is carried over into it (carryIndexes) before the key
//	   moves. The locks and name records are as in 2.
const layoutVersion = 3

// LayoutError says that Redis holds a layout this gateway does not know.
type LayoutError struct {
	Found string // as Redis holds it
	Want  int
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("Redis holds lockgate's layout %q, not one this gateway knows (it reads layout %d, and carries older ones over): "+
		"a newer gateway wrote it, and this one would not see all of its locks; run the newer version, or give this gateway its own --redis-prefix",
		e.Found, e.Want)
}

// CheckLayout makes sure that Redis holds this gateway's layout: it writes
// it on a Redis that has none (a new one, or one that gateways of layout 1
// used), carries an older one over, and refuses (a *LayoutError) one that
// is newer. Call it once at start, before the first request.
func (r *Backend) CheckLayout(ctx context.Context) error {
	key := r.opts.Prefix + "layout"
	want := strconv.Itoa(layoutVersion)
	found, err := r.client.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		// None: a new Redis, or one of layout 1, whose indexes to carry over.
		if err := r.carryIndexes(ctx); err != nil {
			return err
		}
		found, err = r.client.SetArgs(ctx, key, want, redis.SetArgs{Mode: "NX", Get: true}).Result()
		if errors.Is(err, redis.Nil) {
			return nil // written
		}
		if err != nil {
			return fmt.Errorf("%w: write the layout: %w", locks.ErrUnavailable, err)
		}
		if found == want {
			return nil
		}
	case err != nil:
		return fmt.Errorf("%w: read the layout: %w", locks.ErrUnavailable, err)
	case found == want:
		return nil
	}
	n, err := strconv.Atoi(found)
	if err != nil || n > layoutVersion {
		return &LayoutError{Found: found, Want: layoutVersion}
	}
	// Older: the indexes move (see layoutVersion), then the key.
	if err := r.carryIndexes(ctx); err != nil {
		return err
	}
	if err := r.client.Set(ctx, key, want, 0).Err(); err != nil {
		return fmt.Errorf("%w: write the layout: %w", locks.ErrUnavailable, err)
	}
	return nil
}

// carryIndexes moves every namespace index of layouts 1 and 2 (two sorted
// sets, prefix index:{ns} and that :ends) into the index of layout 3, a
// batch of entries a call (lua/index.lua), and deletes them. It finds them
// by SCAN on every master: once, at the start of the first gateway of
// layout 3 on that Redis.
func (r *Backend) carryIndexes(ctx context.Context) error {
	namespaces, err := r.scanNamespaces(ctx, r.opts.Prefix+"index:{")
	if err != nil {
		return fmt.Errorf("%w: find the indexes to carry over: %w", locks.ErrUnavailable, err)
	}
	for _, ns := range namespaces {
		for {
			left, err := r.callCarryIndex(ctx, ns)
			if err != nil {
				return fmt.Errorf("%w: carry the index of namespace %s over: %w", locks.ErrUnavailable, ns, err)
			}
			if left == 0 {
				break
			}
		}
	}
	return nil
}
