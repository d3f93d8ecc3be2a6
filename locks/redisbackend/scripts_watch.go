package redisbackend

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// The typed calls of the watch scripts (lua/watch.lua, lua/watching.lua).

// watchReply is lua/watch.lua's reply.
type watchReply struct {
	index  int64
	events []locks.Event // after the index asked for, oldest first
	first  bool          // the oldest event kept is the history's first (see locks.ChangeAfter)
	held   bool
	info   locks.Info
}

// callWatch runs lua/watch.lua on key's lock: its events after index after,
// its holders, their leases counted from start, and its queue's priorities.
func (r *Backend) callWatch(ctx context.Context, key locks.Key, after int64, start time.Time) (watchReply, error) {
	k := r.lockKeys(key)
	cmd, _ := r.run(ctx, watchScript, k.all(), r.arg.opts, after, locks.MaxHoldersShown)
	res, err := cmd.Slice()
	if err != nil {
		return watchReply{}, err
	}
	if len(res) != 4 {
		return watchReply{}, unexpectedReply(res)
	}
	index, ok := res[0].(int64)
	raw, ok2 := res[1].([]any)
	holders, ok3 := res[2].([]any)
	first, ok4 := res[3].(int64)
	if !ok || !ok2 || !ok3 || !ok4 {
		return watchReply{}, unexpectedReply(res)
	}
	newest := make([]string, len(raw))
	for i, e := range raw {
		newest[len(raw)-1-i], _ = e.(string) // oldest first
	}
	events, err := decodeEvents(newest)
	if err != nil {
		return watchReply{}, err
	}
	holders, prios := splitPriorities(holders)
	info, held := parseHolders(holders, start)
	if held {
		info.Describe()
		info.QueuePriorities = prios
	}
	return watchReply{index: index, events: events, first: first == 1, held: held, info: info}, nil
}

// callWatching runs lua/watching.lua: this gateway watches key's lock for
// keep from now, or, with keep 0, no longer.
func (r *Backend) callWatching(ctx context.Context, key locks.Key, keep time.Duration) error {
	cmd, _ := r.run(ctx, watchingScript, r.lockKeys(key).all(), r.arg.channel, keep.Milliseconds(), r.arg.opts)
	return cmd.Err()
}
