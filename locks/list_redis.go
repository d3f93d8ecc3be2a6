package locks

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Bounds on the work of one page: at most listScans SCAN calls, each
// asking for about listCount(limit) keys. A namespace whose locks are few
// among many keys gets short pages, rather than one slow call.
const (
	listScans    = 16
	listCountMin = 100
	listCountMax = 1000
)

func listCount(limit int) int64 { return int64(min(max(2*limit, listCountMin), listCountMax)) }

// listNode is one Redis node a listing scans: the server itself, or one
// master of a cluster. id names it in a cursor without revealing its
// address.
type listNode struct {
	id     string
	client redis.Cmdable
}

// listNodes returns the nodes that hold the locks, in the order a listing
// visits them: a cluster's masters in the order of their ids.
func (r *Redis) listNodes(ctx context.Context) ([]listNode, error) {
	cluster, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return []listNode{{id: "-", client: r.client}}, nil
	}
	var (
		mu    sync.Mutex
		nodes []listNode
	)
	err := cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		sum := sha256.Sum256([]byte(c.Options().Addr))
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, listNode{id: hex.EncodeToString(sum[:8]), client: c})
		return nil
	})
	slices.SortFunc(nodes, func(a, b listNode) int { return cmp.Compare(a.id, b.id) })
	return nodes, err
}

// listState is where a listing stands: on node id, at SCAN cursor scan;
// after is set when the last page ended within the batch that cursor
// returns, and names the last lock taken from it.
type listState struct {
	node  string
	scan  uint64
	after string
}

func (s listState) cursor() string {
	return encodeCursor(cursorRedis, s.node, strconv.FormatUint(s.scan, 10), s.after)
}

func parseListState(cursor string) (listState, error) {
	f, err := decodeCursor(cursor, cursorRedis, 3)
	if err != nil {
		return listState{}, err
	}
	scan, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || f[0] == "" || (f[2] != "" && !ValidName(f[2])) {
		return listState{}, errBadCursor
	}
	return listState{node: f[0], scan: scan, after: f[2]}, nil
}

// List implements Lister. It scans each node for the keys of lock hashes
// of namespace (prefix{namespace/name}: the pattern leaves out the keys
// with suffixes, and semaphores, whose keys start prefix sem:), and reads
// each lock found with Inspect, all at once through the batcher.
//
// A page that must stop within the batch of keys one SCAN call returned
// takes the batch's names in order, and its cursor says where it stopped:
// the next page runs the same SCAN call again and skips the names up to
// there.
func (r *Redis) List(ctx context.Context, namespace, cursor string, limit int) (Page, error) {
	if err := checkList(namespace, limit); err != nil {
		return Page{}, err
	}
	var st listState
	if cursor != "" {
		var err error
		if st, err = parseListState(cursor); err != nil {
			return Page{}, err
		}
	}
	what := nsString(namespace)
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	nodes, err := r.listNodes(cctx)
	if err != nil {
		return Page{}, unavailable("list", what, err)
	}
	// The node the cursor names, or the next one: a node that left (a
	// failover) cannot be resumed.
	i := 0
	if cursor != "" {
		i, _ = slices.BinarySearchFunc(nodes, st.node, func(n listNode, id string) int { return cmp.Compare(n.id, id) })
		if i == len(nodes) || nodes[i].id != st.node {
			st = listState{}
		}
	}
	match := globEscape(r.opts.Prefix+"{"+namespace+"/") + "*}"
	prefix := r.opts.Prefix + "{" + namespace + "/"
	var names []string
	for scans := 0; scans < listScans && i < len(nodes) && len(names) < limit; scans++ {
		keys, next, err := nodes[i].client.Scan(cctx, st.scan, match, listCount(limit)).Result()
		if err != nil {
			return Page{}, unavailable("list", what, err)
		}
		batch := make([]string, 0, len(keys))
		for _, k := range keys {
			name, ok := strings.CutSuffix(strings.TrimPrefix(k, prefix), "}")
			if ok && len(k) > len(prefix) && ValidName(name) && name > st.after {
				batch = append(batch, name)
			}
		}
		slices.Sort(batch)
		batch = slices.Compact(batch)
		if room := limit - len(names); len(batch) > room {
			names = append(names, batch[:room]...)
			st.after = batch[room-1]
			break
		}
		names = append(names, batch...)
		st.scan, st.after = next, ""
		if next == 0 {
			if i++; i < len(nodes) {
				st.node = nodes[i].id
			}
		}
	}
	page := Page{Locks: make([]Listed, 0, len(names))}
	if i < len(nodes) {
		st.node = nodes[i].id
		page.Next = st.cursor()
	}
	infos := make([]Info, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for j, name := range names {
		wg.Go(func() { infos[j], errs[j] = r.Inspect(ctx, Key{Namespace: namespace, Name: name}) })
	}
	wg.Wait()
	for j, name := range names {
		switch {
		case errors.Is(errs[j], ErrNotHeld): // freed since the scan
		case errs[j] != nil:
			return Page{}, errs[j]
		default:
			page.Locks = append(page.Locks, Listed{Key: Key{Namespace: namespace, Name: name}, Info: infos[j]})
		}
	}
	return page, nil
}

// globEscape quotes the characters SCAN's MATCH treats as special.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// nsString names a namespace in errors.
type nsString string

func (n nsString) String() string { return "namespace " + string(n) }
