package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// A page of GET /locks/{ns} once cost Redis time in proportion to the
// whole keyspace (16 SCANs and 10 ms with 300 000 unrelated keys). These
// tests count the commands Redis ran for a listing
// of a namespace of a few locks, beside no other keys and then beside
// 100 000, and want the same count, under a bound set by the locks listed.

// listCostKeys is the size of the unrelated keyspace.
const listCostKeys = 100_000

func TestRedisListCostIsBoundedByThePage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{})
	admin := srv.Client(t)
	testListCost(t, r, admin, []*redis.Client{admin})
}

func TestRedisClusterListCostIsBoundedByThePage(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	r := openRedis(t, client, redisbackend.Options{})
	t.Cleanup(func() { r.Close() })
	nodes := make([]*redis.Client, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		nodes[i] = n.Client(t)
	}
	testListCost(t, r, client, nodes)
}

// listCostLocks is how many locks the namespace holds.
const listCostLocks = 5

// listCostPerLock bounds the commands Redis runs per lock listed, and for
// the page itself: a script call (EVALSHA_RO) and the commands it runs.
const listCostPerLock = 12

func testListCost(t *testing.T, r *redisbackend.Backend, client redis.Cmdable, nodes []*redis.Client) {
	ns := locktest.UniqueNamespace(t)
	for i := range listCostLocks {
		locktest.MustAcquire(t, r, locks.Key{Namespace: ns, Name: fmt.Sprintf("job-%d", i)}, locks.AcquireRequest{TTL: time.Hour})
	}
	// The calls of a listing of the whole namespace, at most 100 locks a
	// page: before the unrelated keys, and beside them; after one that
	// loads the scripts (and the cluster's slots).
	listCalls(t, r, ns, nodes)
	before := listCalls(t, r, ns, nodes)
	fill(t, client, listCostKeys)
	beside := listCalls(t, r, ns, nodes)
	t.Logf("a listing of %d locks: %d Redis commands beside no other key, %d beside %d keys", listCostLocks, before.calls, beside.calls, listCostKeys)
	t.Logf("Redis time: %d µs and %d µs", before.usec, beside.usec)
	if beside.calls != before.calls {
		t.Errorf("beside %d unrelated keys: got %d Redis commands (%d SCANs), want %d, as beside none", listCostKeys, beside.calls, beside.scans, before.calls)
	}
	if bound := listCostPerLock * (listCostLocks + 1); beside.calls > bound {
		t.Errorf("got %d Redis commands for one page of %d locks, want at most %d", beside.calls, listCostLocks, bound)
	}
}

// listCost is what Redis ran for a listing.
type listCost struct {
	calls, scans, usec int
}

// listCalls lists ns to the end, and returns what the nodes ran meanwhile
// (INFO commandstats after CONFIG RESETSTAT), but those of notListing.
func listCalls(t *testing.T, l locks.Lister, ns string, nodes []*redis.Client) listCost {
	t.Helper()
	ctx := t.Context()
	for _, n := range nodes {
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := locktest.ListAll(t, l, ns, 100)
	if len(got) != listCostLocks {
		t.Fatalf("got %d locks listed, want %d", len(got), listCostLocks)
	}
	var c listCost
	for _, n := range nodes {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") || notListing[name] {
				continue
			}
			calls, usec := statField(stats, "calls"), statField(stats, "usec")
			c.calls += calls
			c.usec += usec
			if name == "cmdstat_scan" {
				c.scans += calls
			}
		}
	}
	return c
}

// notListing are the commands that a listing does not run: the
// measurement's own, and those of clients that open a connection or learn
// a cluster's slots.
var notListing = map[string]bool{"cmdstat_info": true, "cmdstat_config|resetstat": true,
	"cmdstat_hello": true, "cmdstat_client|setinfo": true, "cmdstat_client|setname": true,
	"cmdstat_ping": true, "cmdstat_cluster|slots": true, "cmdstat_cluster|shards": true, "cmdstat_readonly": true}

// statField reads field=N out of a commandstats line's "calls=3,usec=...".
func statField(stats, field string) int {
	for kv := range strings.SplitSeq(stats, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == field {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// fill writes n keys that are no lock's, in pipelines of 10 000.
func fill(t *testing.T, client redis.Cmdable, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 10_000 {
		pipe := client.Pipeline()
		for j := i; j < min(i+10_000, n); j++ {
			pipe.Set(ctx, "unrelated:"+strconv.Itoa(j), "x", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
}

// The index lists a name until a time it keeps in the name record, and a
// grant or renewal writes it again only when its lease would end past
// that time (lua/lib_index.lua). These tests hold a lock far longer than
// the index's first entry for it lasts (an index period of 200 ms, from a
// fence retention of 400 ms), by renewals and by one long lease, and want
// it listed throughout.
func TestRedisLockHeldPastIndexKeepIsListed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, history := range []int{0, 10} {
		t.Run(fmt.Sprintf("history=%d", history), func(t *testing.T) {
			r := newRedis(t, srv, redisbackend.Options{History: history, FenceRetention: 400 * time.Millisecond})
			testHeldPastIndexKeep(t, r, srv.Client(t))
		})
	}
}

func TestRedisClusterLockHeldPastIndexKeepIsListed(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	r := openRedis(t, client, redisbackend.Options{FenceRetention: 400 * time.Millisecond})
	t.Cleanup(func() { r.Close() })
	testHeldPastIndexKeep(t, r, client)
}

func testHeldPastIndexKeep(t *testing.T, r *redisbackend.Backend, client redis.Cmdable) {
	ctx := t.Context()
	ns := locktest.UniqueNamespace(t)
	renewed := locks.Key{Namespace: ns, Name: "renewed"}
	long := locks.Key{Namespace: ns, Name: "long"}
	g := locktest.MustAcquire(t, r, renewed, locks.AcquireRequest{TTL: time.Second})
	locktest.MustAcquire(t, r, long, locks.AcquireRequest{TTL: time.Minute})
	first, ok := indexUntil(t, client, renewed)
	if !ok {
		t.Fatalf("the index has no entry of %s", renewed)
	}
	// Renew and list until the Redis clock is well past the first entry's
	// time (the index's node's): about 2 s, of rounds of about a ms.
	for round := 0; ; round++ {
		if round == 1_000_000 {
			t.Fatalf("the Redis clock did not pass %.0f within %d rounds", first, round)
		}
		// A busy machine may let the 1 s lease run out between two rounds
		// (CI at load 27: "round 33: got [long] listed"): a lock that is
		// not held need not be listed, so take it again and go on. A lock
		// that is held must be.
		if _, err := r.Renew(ctx, renewed, g.Token, time.Second); errors.Is(err, locks.ErrNotHolder) {
			g = locktest.MustAcquire(t, r, renewed, locks.AcquireRequest{TTL: time.Second})
		} else if err != nil {
			t.Fatalf("round %d: renew: %v", round, err)
		}
		got, _ := locktest.ListAll(t, r, ns, 10)
		if len(got) != 2 {
			if _, err := r.Inspect(ctx, renewed); errors.Is(err, locks.ErrNotHeld) {
				continue
			}
			t.Fatalf("round %d: got %v listed, want %s and %s, both held", round, slices.Sorted(maps.Keys(got)), long.Name, renewed.Name)
		}
		now, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if float64(now.UnixMilli()) > first+400 {
			t.Logf("listed throughout %d rounds", round+1)
			break
		}
	}
	if later, _ := indexUntil(t, client, renewed); later <= first {
		t.Errorf("the index's entry of %s: got time %.0f, want later than the first, %.0f", renewed, later, first)
	}
}

// TestRedisClusterFailedIndexWriteIsRetried: on Cluster the gateway writes
// a name's entry when the lock script asks for it, and the name record
// says the name is listed only once that write succeeded (lua/indexed.lua).
// So a write that fails (here the index's key is of the wrong type) is
// not taken for done: the name's next grant asks again, and is listed.
func TestRedisClusterFailedIndexWriteIsRetried(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	r := openRedis(t, client, redisbackend.Options{})
	t.Cleanup(func() { r.Close() })
	ctx := t.Context()
	ns := locktest.UniqueNamespace(t)
	key := locks.Key{Namespace: ns, Name: "job"}
	names := "lockgate:names:{" + ns + "}"
	if err := client.Set(ctx, names, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})
	if _, err := r.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	if err := client.Del(ctx, names).Err(); err != nil {
		t.Fatal(err)
	}
	locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})
	if got, _ := locktest.ListAll(t, r, ns, 10); len(got) != 1 {
		t.Errorf("the name's next grant: got %v listed, want %s", slices.Sorted(maps.Keys(got)), key.Name)
	}
}
