package redisbackend

import (
	"context"
	"errors"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// The typed calls of a namespace's index of lock names (see list.go for
// the index itself).

// indexDir is the directory of namespace's index (lua/lib_index.lua),
// which names its buckets.
func (r *Backend) indexDir(namespace string) string {
	return r.opts.Prefix + "names:{" + namespace + "}"
}

// callIndex runs lua/index.lua: the index of key's namespace lists its
// name for left from now, at least.
func (r *Backend) callIndex(ctx context.Context, key locks.Key, left time.Duration) error {
	cmd, _ := r.run(ctx, indexScript, []string{r.indexDir(key.Namespace)}, key.Name, left.Milliseconds())
	return cmd.Err()
}

// callCarryIndex runs lua/index.lua without a name: it moves up to 256
// entries of namespace's index of layout 2 (two sorted sets, prefix
// index:{ns} and that :ends) into its index, and answers how many are left.
func (r *Backend) callCarryIndex(ctx context.Context, namespace string) (int64, error) {
	old := r.opts.Prefix + "index:{" + namespace + "}"
	cmd, _ := r.run(ctx, indexScript, []string{r.indexDir(namespace), old, old + ":ends"}, "", 0)
	return cmd.Int64()
}

// callIndexed runs lua/indexed.lua: key's name record notes that the index
// lists the name until until, ms on the lock's node's clock.
func (r *Backend) callIndexed(ctx context.Context, key locks.Key, until int64) error {
	cmd, _ := r.run(ctx, indexedScript, []string{r.lockKeys(key).fence}, until, r.arg.retention)
	return cmd.Err()
}

// listArgs are ARGV of lua/list.lua.
type listArgs struct {
	start  string // where the previous page stopped, as a bound (redisListPos.bound); "" for the first
	limit  int    // names, at most
	budget int    // entries looked at, at most
	// keys is the namespace's lock keys up to the name, on a single Redis,
	// where the script passes over a name whose lock has no key; "" on
	// Cluster.
	keys string
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
	cmd, _ := r.run(ctx, listScript, []string{r.indexDir(namespace)}, a.start, a.limit, a.budget, a.keys)
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
