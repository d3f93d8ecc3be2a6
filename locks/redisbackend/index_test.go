package redisbackend_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// The namespace index (lua/lib_index.lua) is a directory of buckets, each
// a sorted set of entries 'name', a space, and until when the index lists
// the name (seconds, 4 bytes). These helpers read it as a test must see
// it: through keys of the namespace's hash tag only, so that they work on
// Cluster too.

// indexDir is the directory of ns's index.
func indexDir(ns string) string { return "lockgate:names:{" + ns + "}" }

// indexEntries returns every entry of ns's index, by name: until when it
// lists the name, ms; and the directory's bounds whose bucket is gone.
func indexEntries(t *testing.T, client redis.Cmdable) func(ns string) (map[string]float64, []string) {
	return func(ns string) (map[string]float64, []string) {
		t.Helper()
		ctx := t.Context()
		dir := indexDir(ns)
		los, err := client.ZRange(ctx, dir, 0, -1).Result()
		if err != nil {
			t.Fatalf("the index's directory: %v", err)
		}
		got := map[string]float64{}
		var gone []string
		for _, lo := range los {
			entries, err := client.ZRange(ctx, dir+":"+lo, 0, -1).Result()
			if err != nil {
				t.Fatalf("the index's bucket %q: %v", lo, err)
			}
			if len(entries) == 0 {
				gone = append(gone, lo)
			}
			for _, e := range entries {
				name, b := e[:len(e)-5], []byte(e[len(e)-4:])
				if _, dup := got[name]; dup {
					t.Errorf("the index has %s twice", name)
				}
				got[name] = float64(int64(b[0])<<24|int64(b[1])<<16|int64(b[2])<<8|int64(b[3])) * 1000
			}
		}
		return got, gone
	}
}

// indexUntil is until when the index lists key's name, ms on the Redis
// clock, and whether it does.
func indexUntil(t *testing.T, client redis.Cmdable, key locks.Key) (float64, bool) {
	t.Helper()
	got, _ := indexEntries(t, client)(key.Namespace)
	ms, ok := got[key.Name]
	return ms, ok
}

// A name's entry stays in the index past its lock's release, until an
// index period or two after its last lease; then the index's writes drop
// it: its bucket, once it fills (or expires, when nothing more is written
// to it), and the directory the bounds of buckets that expired. These
// tests fill a namespace with released names of an index period of 200 ms
// (a fence retention of 400 ms), wait on the Redis clock until their
// entries are past their time, then write new names, and want the old
// ones gone and the new ones listed, in name order.
func TestRedisStaleNamesLeaveTheIndex(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{FenceRetention: 400 * time.Millisecond})
	testStaleNamesLeave(t, r, newRedis(t, srv, redisbackend.Options{}), srv.Client(t))
}

func TestRedisClusterStaleNamesLeaveTheIndex(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	r := openRedis(t, client, redisbackend.Options{FenceRetention: 400 * time.Millisecond})
	t.Cleanup(func() { r.Close() })
	fresh := openRedis(t, client, redisbackend.Options{})
	t.Cleanup(func() { fresh.Close() })
	testStaleNamesLeave(t, r, fresh, client)
}

// staleNames is how many names each step writes: past a bucket's 120
// entries, so that buckets split and fill again.
const staleNames = 300

// testStaleNamesLeave writes the old names through r, whose short
// retention makes them stale soon, and the new ones through fresh, with
// the default retention, so that none of the new ones is past its time
// however slow the machine (TestRedisStaleNamesLeaveTheIndex found 237 of
// 300 entries left when one backend wrote both at load 7: the first ones
// were stale, and swept, before the last were written).
func testStaleNamesLeave(t *testing.T, r, fresh *redisbackend.Backend, client redis.Cmdable) {
	ctx := t.Context()
	ns := locktest.UniqueNamespace(t)
	entries := indexEntries(t, client)
	cycleNames := func(r *redisbackend.Backend, prefix string) {
		for i := range staleNames {
			key := locks.Key{Namespace: ns, Name: fmt.Sprintf("%s-%03d", prefix, i)}
			g := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Second})
			// A busy machine may let the lease run out first: the name
			// is in the index all the same.
			if _, err := r.Release(ctx, key, g.Token); err != nil && !errors.Is(err, locks.ErrNotHolder) {
				t.Fatal(err)
			}
		}
	}
	cycleNames(r, "old")
	old, _ := entries(ns)
	// On a busy machine the first may be past their time, and swept, by
	// the time the last are written: the index lists no more than those.
	if len(old) == 0 || len(old) > staleNames {
		t.Fatalf("after %d released names: the index has %d entries, want 1 to %d", staleNames, len(old), staleNames)
	}
	last := slices.Max(slices.Collect(maps.Values(old)))
	for round := 0; ; round++ {
		if round == 1_000_000 {
			t.Fatalf("the Redis clock did not pass %.0f within %d rounds", last, round)
		}
		now, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if float64(now.UnixMilli()) > last {
			break
		}
	}
	// Names that sort before, among and after the old ones.
	for _, prefix := range []string{"a", "old-1", "z"} {
		cycleNames(fresh, prefix)
	}
	got, gone := entries(ns)
	var stale []string
	for name := range got {
		if strings.HasPrefix(name, "old-") && !strings.HasPrefix(name, "old-1-") {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		t.Errorf("%d names past their time are still in the index, of %d: %q ...", len(stale), staleNames, stale[:min(5, len(stale))])
	}
	if len(got) != 3*staleNames {
		t.Errorf("the index has %d entries, want the %d names written since", len(got), 3*staleNames)
	}
	if len(gone) > 0 {
		t.Errorf("the index's directory names %d buckets that are gone: %q", len(gone), gone)
	}
	// The names written since, held, are listed in name order.
	var want []string
	for _, prefix := range []string{"a", "old-1", "z"} {
		for i := 0; i < staleNames; i += 37 {
			key := locks.Key{Namespace: ns, Name: fmt.Sprintf("%s-%03d", prefix, i)}
			locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})
			want = append(want, key.Name)
		}
	}
	slices.Sort(want)
	var listed []string
	cursor := ""
	for page := 0; page == 0 || cursor != ""; page++ {
		if page > 3*staleNames {
			t.Fatal("the listing does not end")
		}
		p, err := r.List(ctx, ns, cursor, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Locks {
			listed = append(listed, l.Key.Name)
		}
		cursor = p.Next
	}
	if !slices.Equal(listed, want) {
		t.Errorf("listed %q, want %q", listed, want)
	}
}

// A gateway of layout 3 on a Redis whose namespace indexes are of layout 2
// (or 1: entries 'name hold'), two sorted sets each, carries their live
// entries over at its start (CheckLayout), drops the rest, and lists the
// locks they name.
func TestRedisCarriesTheIndexOver(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	r := newRedis(t, srv, redisbackend.Options{})
	testCarryIndex(t, r, admin)
}

func TestRedisClusterCarriesTheIndexOver(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	r := openRedis(t, client, redisbackend.Options{})
	t.Cleanup(func() { r.Close() })
	testCarryIndex(t, r, client)
}

func testCarryIndex(t *testing.T, r *redisbackend.Backend, client redis.Cmdable) {
	ctx := t.Context()
	if err := r.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	ns := locktest.UniqueNamespace(t)
	// 300 held locks (more than a batch of the carry), indexed in the
	// layout of 2: their entries of layout 3 are taken away.
	const n = 300
	for i := range n {
		locktest.MustAcquire(t, r, locks.Key{Namespace: ns, Name: fmt.Sprintf("job-%03d", i)}, locks.AcquireRequest{TTL: time.Hour})
	}
	keys, _ := indexEntries(t, client)(ns)
	if len(keys) != n {
		t.Fatalf("the index has %d entries, want %d", len(keys), n)
	}
	los := client.ZRange(ctx, indexDir(ns), 0, -1).Val()
	for _, lo := range los {
		client.Del(ctx, indexDir(ns)+":"+lo)
	}
	client.Del(ctx, indexDir(ns), indexDir(ns)+"#")
	names, ends := "lockgate:index:{"+ns+"}", "lockgate:index:{"+ns+"}:ends"
	now, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	live := float64(now.Add(time.Hour).UnixMilli())
	for i := range n {
		member := fmt.Sprintf("job-%03d", i)
		if i%2 == 1 {
			member += " 0123456789abcdef" // layout 1: one entry per grant
		}
		client.ZAdd(ctx, names, redis.Z{Member: member})
		client.ZAdd(ctx, ends, redis.Z{Member: member, Score: live})
	}
	// Past their time: not carried over.
	for i := range 10 {
		member := fmt.Sprintf("gone-%d", i)
		client.ZAdd(ctx, names, redis.Z{Member: member})
		client.ZAdd(ctx, ends, redis.Z{Member: member, Score: float64(now.Add(-time.Minute).UnixMilli())})
	}
	client.Set(ctx, "lockgate:layout", "2", 0)
	if err := r.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if got := client.Exists(ctx, names, ends).Val(); got != 0 {
		t.Errorf("after the carry: %d keys of the old index left, want none", got)
	}
	carried, _ := indexEntries(t, client)(ns)
	if len(carried) != n {
		t.Errorf("the index has %d entries after the carry, want %d", len(carried), n)
	}
	for name, ms := range carried {
		if ms < live {
			t.Errorf("%s: carried over until %.0f, want at least %.0f", name, ms, live)
		}
	}
	got, _ := locktest.ListAll(t, r, ns, 100)
	if len(got) != n {
		t.Errorf("listed %d locks after the carry, want %d", len(got), n)
	}
}
