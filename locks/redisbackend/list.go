package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// A namespace's index of lock names (lua/lib_index.lua, index.lua): a
// directory under the namespace's own hash tag, and buckets of up to 120
// entries each, in name order, each entry a name and until when the index
// lists it, so that Redis keeps each bucket packed (about 35 bytes a
// name). An entry is written when a name is new to the index, or a lease
// would end past its time: once per index period (half the fence
// retention) for a name in steady use, and never by a release. Until when
// it lists a name is kept in the name's record, which every grant reads
// and writes anyway, so a grant of a name that is indexed costs the index
// nothing. The index is advisory: no script reads it to decide who holds
// what; it names free locks too, which List passes over. See
// docs/SAFETY.md ("Listing").
//
// Cursors of gateways before layout 2, whose entries were 'name hold' per
// grant, name a hold too: indexHoldLen characters of a token hash.
const indexHoldLen = 16

// listStale is how many entries of free names or names past their time
// a page may pass over beyond twice its limit, before it returns short
// (see lua/list.lua).
const listStale = 64

// inlineIndex is 1 when the lock scripts write the index themselves
// (lua/lib_index.lua index_write): on a single Redis, where a script may
// touch any key. On Cluster it is 0: the index is on the namespace's slot,
// not the lock's, and the gateway writes an entry when a script's reply
// asks for it (indexDue).
func inlineIndex(client any) int {
	if _, cluster := client.(*redis.ClusterClient); cluster {
		return 0
	}
	return 1
}

// indexDue writes the index's entries that a lock script's reply asks for
// on Cluster, and takes them off the reply: a last element
// {INDEX_DUE, "ns/name", until, left, ...} (lua/lib_index.lua
// index_trailer). A script asks only when a lease it answers would end
// past until when the index lists the name: the name's first grant in an
// index period, mostly. Each entry is written (lua/index.lua) before the
// caller learns of the grant, and then noted in the name's record
// (lua/indexed.lua), so that the name's next grants ask for nothing; if
// either fails, the record does not say so, and the next grant asks
// again. The errors are dropped: a lock whose entry is missing is not
// listed, but who holds what does not change.
func (r *Backend) indexDue(ctx context.Context, cmd *redis.Cmd) {
	out, ok := cmd.Val().([]any)
	if !ok || len(out) == 0 {
		return
	}
	due, ok := out[len(out)-1].([]any)
	if !ok || len(due) == 0 || due[0] != indexDue {
		return
	}
	cmd.SetVal(out[:len(out)-1])
	ctx = context.WithoutCancel(ctx) // the grant may be kept (an idempotency key) when its caller left
	for i := 1; i+2 < len(due); i += 3 {
		tag, _ := due[i].(string)
		until, _ := due[i+1].(int64)
		left, _ := due[i+2].(int64)
		ns, name, ok := strings.Cut(tag, "/")
		if !ok {
			continue
		}
		key := locks.Key{Namespace: ns, Name: name}
		if r.callIndex(ctx, key, millis(left)) == nil {
			r.callIndexed(ctx, key, until)
		}
	}
}

// redisListPos is where a Redis listing stands: past every entry of name,
// or, with hold, past the entry 'name hold' (see lua/list.lua).
type redisListPos struct{ name, hold string }

func parseRedisListPos(cursor string) (redisListPos, error) {
	f, err := locks.DecodeCursor(cursor, locks.CursorRedis, 2)
	if err != nil || !locks.ValidName(f[0]) || !validIndexHold(f[1]) {
		return redisListPos{}, locks.ErrBadCursor
	}
	return redisListPos{name: f[0], hold: f[1]}, nil
}

// validIndexHold: "" or indexHoldLen characters of a token hash.
func validIndexHold(h string) bool {
	if h == "" {
		return true
	}
	if len(h) != indexHoldLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !locks.Alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// bound is the position as lua/list.lua takes it.
func (p redisListPos) bound() string {
	if p.hold == "" {
		return "(" + p.name + "!"
	}
	return "(" + p.name + " " + p.hold
}

// posOfBound reads a bound that lua/list.lua returned.
func posOfBound(b string) (redisListPos, bool) {
	s, ok := strings.CutPrefix(b, "(")
	if name, ok2 := strings.CutSuffix(s, "!"); ok && ok2 && locks.ValidName(name) {
		return redisListPos{name: name}, true
	}
	name, hold, ok2 := strings.Cut(s, " ")
	if ok && ok2 && locks.ValidName(name) && validIndexHold(hold) && hold != "" {
		return redisListPos{name: name, hold: hold}, true
	}
	return redisListPos{}, false
}

// List implements Lister. One read of the namespace's index (lua/list.lua)
// names up to limit locks, in name order, after the cursor (on a single
// Redis, only those whose lock has a key); each is then inspected, all at
// once through the batcher, and those found free are passed over. Its
// Redis work is bounded by limit, whatever else the keyspace holds.
func (r *Backend) List(ctx context.Context, namespace, cursor string, limit int) (locks.Page, error) {
	if err := locks.CheckList(namespace, limit); err != nil {
		return locks.Page{}, err
	}
	start := ""
	if cursor != "" {
		pos, err := parseRedisListPos(cursor)
		if err != nil {
			return locks.Page{}, err
		}
		start = pos.bound()
	}
	what := nsString(namespace)
	a := listArgs{start: start, limit: limit, budget: 2*limit + listStale}
	if r.inlineIndex {
		a.keys = r.opts.Prefix + "{" + namespace + "/"
	}
	rp, err := r.callList(ctx, namespace, a)
	if err != nil {
		return locks.Page{}, locks.Unavailable("list", what, err)
	}
	names := rp.names
	page := locks.Page{Locks: make([]locks.Listed, 0, len(names)), Examined: len(names)}
	if rp.hasNext {
		page.Next = locks.EncodeCursor(locks.CursorRedis, rp.next.name, rp.next.hold)
	}
	infos := make([]locks.Info, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for j, name := range names {
		wg.Go(func() { infos[j], errs[j] = r.Inspect(ctx, locks.Key{Namespace: namespace, Name: name}) })
	}
	wg.Wait()
	for j, name := range names {
		switch {
		case errors.Is(errs[j], locks.ErrNotHeld): // freed since its entry was written
		case errs[j] != nil:
			return locks.Page{}, errs[j]
		default:
			page.Locks = append(page.Locks, locks.Listed{Key: locks.Key{Namespace: namespace, Name: name}, Info: infos[j]})
		}
	}
	return page, nil
}

// nsString names a namespace in errors.
type nsString string

func (n nsString) String() string { return "namespace " + string(n) }

// Namespaces implements locks.NamespaceLister: the namespaces whose index of
// lock names exists (it lives as long as its latest entry, up to two index
// periods after the namespace's last lease), found by SCAN on every master (the indexes of a
// Cluster are spread over its slots). It costs a pass over the key
// space, a thousand names per call: for the dashboard's list of
// namespaces, which the gateway caches.
func (r *Backend) Namespaces(ctx context.Context, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit must be at least 1", locks.ErrInvalid)
	}
	found, err := r.scanNamespaces(ctx, r.opts.Prefix+"names:{")
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w: %w", locks.ErrUnavailable, err)
	}
	return found[:min(limit, len(found))], nil
}

// scanNamespaces returns, in order, the namespaces that have a key prefix
// .. ns .. '}' (an index's directory, not its buckets), found by SCAN on
// every master.
func (r *Backend) scanNamespaces(ctx context.Context, prefix string) ([]string, error) {
	match := globEscape(prefix) + "*}" // not the buckets
	var (
		mu    sync.Mutex
		found = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			ns := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), prefix), "}")
			if locks.ValidNamespace(ns) {
				mu.Lock()
				found[ns] = true
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.client)
	}
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(found)), nil
}

// globEscape quotes the characters of s that a Redis glob pattern reads.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
