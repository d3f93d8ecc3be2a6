package redisbackend

import (
	"context"
	"errors"
	"time"
)

// The typed calls of a namespace's index of held locks (see
// scripts_lock.go, and list_redis.go for the index itself).

// indexKeys are the keys of one namespace's index (see lua/index.lua).
type indexKeys struct {
	names string // entries by name, every score 0
	ends  string // the same entries, by when their lease ends
}

func (r *Backend) indexKeys(namespace string) indexKeys {
	names := r.opts.Prefix + "index:{" + namespace + "}"
	return indexKeys{names: names, ends: names + ":ends"}
}

// indexArgs are ARGV of lua/index.lua.
type indexArgs struct {
	op     string // indexAdd, indexExtend or indexDel
	member string // 'name hold' (see indexHoldLen)
	left   time.Duration
}

// callIndex runs lua/index.lua on namespace's index.
func (r *Backend) callIndex(ctx context.Context, namespace string, a indexArgs) error {
	k := r.indexKeys(namespace)
	cmd, _ := r.run(ctx, indexScript, []string{k.names, k.ends}, a.op, a.member, a.left.Milliseconds())
	return cmd.Err()
}

// listArgs are ARGV of lua/list.lua.
type listArgs struct {
	start  string // where the previous page stopped, as a bound (redisListPos.bound); "" for the first
	limit  int    // names, at most
	budget int    // entries looked at, at most
}

// listReply is lua/list.lua's reply.
type listReply struct {
	names []string
	// next is where the page stopped, when more entries may follow.
	next    redisListPos
	hasNext bool
}

// callList runs lua/list.lua on namespace's index.
func (r *Backend) callList(ctx context.Context, namespace string, a listArgs) (listReply, error) {
	k := r.indexKeys(namespace)
	cmd, _ := r.run(ctx, listScript, []string{k.names, k.ends}, a.start, a.limit, a.budget)
	out, err := cmd.StringSlice()
	if err != nil {
		return listReply{}, err
	}
	if len(out) < 1 || len(out)-1 > a.limit {
		return listReply{}, errors.New("unexpected reply of the list script")
	}
	rp := listReply{names: out[1:]}
	if out[0] != "" {
		if rp.next, rp.hasNext = posOfBound(out[0]); !rp.hasNext {
			return listReply{}, errors.New("unexpected position from the list script")
		}
	}
	return rp, nil
}
