package redisbackend_test

import (
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

// What one uncontended lock cycle, an acquire and its release, costs
// Redis: the commands it runs, by name, those run inside the scripts
// included. Redis's time per cycle follows the commands (about 1 to 3 µs
// each, see docs/PERFORMANCE.md), and unlike time they can be counted
// exactly, so a change that adds one fails here and says so.
//
// The cycle is of a name the namespace's index lists already, as any name
// in use is: it writes nothing to the index (no ZADD, ZREM, PTTL nor
// ZRANGEBYSCORE), for the index lists names, not grants, and until when
// it lists this one is in the name record, which the grant writes anyway
// (lua/lib_index.lua).
func TestRedisCycleCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, tc := range []struct {
		history int
		want    map[string]int
	}{
		// GET and SET of each call's record (once.lua), of the name record
		// (history, fencing counter, until when the index lists the name);
		// SET of the grant's record, then of the release's.
		{10, map[string]int{
			"fcall": 2, "time": 2, "get": 3, "set": 4, "hget": 1, "hset": 1, "hmget": 1, "pexpire": 1, "del": 1,
			"exists": 2,
		}},
		// The name record is one SET ... GET of the fencing counter. The
		// release reads no clock: nothing it does without a history needs
		// one (the gateway counts how long the lock was held).
		{0, map[string]int{
			"fcall": 2, "time": 1, "get": 1, "set": 3, "hget": 1, "hset": 1, "hmget": 1, "pexpire": 1, "del": 1,
			"exists": 2,
		}},
	} {
		t.Run(fmt.Sprintf("history=%d", tc.history), func(t *testing.T) {
			l := newRedis(t, srv, redisbackend.Options{History: tc.history})
			key := locktest.UniqueKey(t)
			// The functions loaded, the name in the index, and the lock's
			// history full, as that of a lock taken again and again.
			for range tc.history/2 + 2 {
				cycle(t, l, key)
			}
			if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			cycle(t, l, key)
			got := commandCounts(t, admin)
			if !maps.Equal(got, tc.want) {
				t.Errorf("commands per cycle: got %s (%d), want %s (%d)", formatCounts(got), sumCounts(got), formatCounts(tc.want), sumCounts(tc.want))
			}
			if got, _ := locktest.ListAll(t, l, key.Namespace, 10); len(got) != 0 {
				t.Errorf("after the cycles: got %d locks listed, want none (the name is free)", len(got))
			}
		})
	}
}

// TestRedisClusterCycleCommands: on Redis Cluster, where the gateway and
// not the lock script writes the index (on the namespace's slot), a cycle
// of a name the index lists already runs the same two script calls and
// the same commands as on a single Redis: no index.lua, no indexed.lua.
// The name's first grant runs both (the script's reply asks for them).
func TestRedisClusterCycleCommands(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	l := openRedis(t, cluster.Client(t), redisbackend.Options{History: 0})
	t.Cleanup(func() { l.Close() })
	nodes := make([]*redis.Client, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		nodes[i] = n.Client(t)
	}
	key := locktest.UniqueKey(t)
	resetStats(t, nodes)
	cycle(t, l, key) // the name's first: index.lua and indexed.lua run
	first := clusterCounts(t, nodes)
	if first["fcall"] != 4 {
		t.Errorf("the name's first cycle: got %d FCALLs, want 4 (acquire, index, indexed, release): %s", first["fcall"], formatCounts(first))
	}
	if first["zadd"] != 2 {
		t.Errorf("the name's first cycle: got %d ZADDs, want 2 (the index's entry): %s", first["zadd"], formatCounts(first))
	}
	resetStats(t, nodes)
	cycle(t, l, key)
	// EXISTS: the release's guard against a migrating slot, on Cluster
	// only, and each call's look for a queue.
	want := map[string]int{
		"fcall": 2, "time": 1, "exists": 3, "get": 1, "set": 3, "hget": 1, "hset": 1, "hmget": 1, "pexpire": 1, "del": 1,
	}
	if got := clusterCounts(t, nodes); !maps.Equal(got, want) {
		t.Errorf("commands per cycle: got %s (%d), want %s (%d)", formatCounts(got), sumCounts(got), formatCounts(want), sumCounts(want))
	}
}

// resetStats runs CONFIG RESETSTAT on every node.
func resetStats(t *testing.T, nodes []*redis.Client) {
	t.Helper()
	for _, n := range nodes {
		if err := n.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterCounts is commandCounts summed over nodes, but for the commands
// with which a client learns a cluster's slots (notListing).
func clusterCounts(t *testing.T, nodes []*redis.Client) map[string]int {
	t.Helper()
	sum := map[string]int{}
	for _, n := range nodes {
		for name, c := range commandCounts(t, n) {
			if !notListing["cmdstat_"+name] {
				sum[name] += c
			}
		}
	}
	return sum
}

// cycle acquires key and releases it.
func cycle(t *testing.T, l *redisbackend.Backend, key locks.Key) {
	t.Helper()
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s"})
	if _, err := l.Release(t.Context(), key, g.Token); err != nil {
		t.Fatal(err)
	}
}

// commandCounts reads INFO commandstats: the calls of each command since
// CONFIG RESETSTAT that ran, but those of the test's own connection.
func commandCounts(t *testing.T, admin *redis.Client) map[string]int {
	t.Helper()
	info, err := admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for line := range strings.Lines(info) {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		name, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok || name == "info" || name == "config|resetstat" {
			continue
		}
		// A call refused (an FCALL of a function not loaded yet) is not
		// one that ran.
		if n := statField(stats, "calls") - statField(stats, "failed_calls") - statField(stats, "rejected_calls"); n > 0 {
			got[name] = n
		}
	}
	return got
}

func formatCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestRedisReleasedNameKeepsOneKey: what a lock name keeps in Redis once
// its grant was released, through --fence-retention, is one key, its name
// record: the fencing counter and the history (lua/lib_fence.lua). The
// grant's and the calls' records go within minutes.
func TestRedisReleasedNameKeepsOneKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{History: 10, FenceRetention: time.Hour})
	key := locktest.UniqueKey(t)
	cycle(t, l, key)
	var kept []string
	iter := admin.Scan(t.Context(), 0, "lockgate:{"+key.String()+"}*", 100).Iterator()
	for iter.Next(t.Context()) {
		if ttl := admin.PTTL(t.Context(), iter.Val()).Val(); ttl < 0 || ttl > 2*locks.RecordTTL {
			kept = append(kept, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lockgate:{" + key.String() + "}:fence"}; !slices.Equal(kept, want) {
		t.Errorf("a released name keeps %q, want %q", kept, want)
	}
	if evs, err := l.History(t.Context(), key); err != nil || len(evs) != 2 {
		t.Errorf("its history: %+v (%v), want the acquire and the release", evs, err)
	}
}

// TestRedisLockNamesKeptAreBounded: the lock libraries keep each lock's
// key names for the calls after (lua/lib_keys.lua lock_keys_at), in Lua's
// memory, outside maxmemory: at most LOCK_NAMES_MAX (256) names, about
// 1.5 KB each per library. 1 200 names, acquired and released, kept about
// 4.6 MB in the acquire and release libraries without the bound, 0.6 MB
// with it. Not parallel: its cycles, as fast as they go, ran beside the
// Cluster tests (18 s under -race with 3 000 names), which CI then saw
// fail (TestRedisClusterFollowsMoved, twice).
func TestRedisLockNamesKeptAreBounded(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{History: 0})
	functionsMemory := func() int {
		info, err := admin.Info(t.Context(), "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory_vm_functions:"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("INFO memory has no used_memory_vm_functions")
		return 0
	}
	ns := locktest.UniqueKey(t).Name
	cycle(t, l, locks.Key{Namespace: ns, Name: "first"})
	before := functionsMemory()
	for i := range 1200 {
		cycle(t, l, locks.Key{Namespace: ns, Name: "n" + strconv.Itoa(i)})
	}
	grew := functionsMemory() - before
	t.Logf("the functions' Lua memory grew by %d bytes", grew)
	if grew > 2<<20 {
		t.Errorf("after 1 200 names the functions' Lua memory grew by %d bytes, want at most 2 MiB", grew)
	}
}
