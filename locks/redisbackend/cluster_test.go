package redisbackend_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisClusterConformance runs the whole suite on a three-master Redis
// Cluster: every key a script touches shares the lock's hash tag, and
// hand-offs reach the waiter's gateway whichever node it subscribed on.
func TestRedisClusterConformance(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	newBackend := func(t *testing.T) locks.Backend {
		r := openRedis(t, cluster.Client(t), redisbackend.Options{})
		t.Cleanup(func() { r.Close() })
		return r
	}
	t.Run("Locks", func(t *testing.T) {
		locktest.Run(t, func(t *testing.T) locks.Locker { return newBackend(t) })
	})
	t.Run("Semaphores", func(t *testing.T) { locktest.RunSemaphores(t, newBackend) })
	t.Run("LockDelay", func(t *testing.T) {
		locktest.RunLockDelay(t, func(t *testing.T) locks.Locker {
			r := openRedis(t, cluster.Client(t), redisbackend.Options{LockDelay: locktest.LockDelay})
			t.Cleanup(func() { r.Close() })
			return r
		})
	})
	t.Run("List", func(t *testing.T) { locktest.RunList(t, newBackend) })
	t.Run("SharedCap", func(t *testing.T) {
		locktest.RunSharedCap(t, func(t *testing.T) locks.Locker {
			r := openRedis(t, cluster.Client(t), redisbackend.Options{MaxSharedHolders: locktest.SharedCap})
			t.Cleanup(func() { r.Close() })
			return r
		})
	})
	withHistory := func(t *testing.T) locks.Backend {
		r := openRedis(t, cluster.Client(t), redisbackend.Options{History: locktest.HistoryLen})
		t.Cleanup(func() { r.Close() })
		return r
	}
	t.Run("History", func(t *testing.T) { locktest.RunHistory(t, withHistory) })
	t.Run("Values", func(t *testing.T) { locktest.RunValues(t, withHistory) })
	t.Run("Break", func(t *testing.T) {
		locktest.RunBreak(t, func(t *testing.T) (locks.Backend, locks.Backend) {
			return withHistory(t), withHistory(t)
		})
	})
	t.Run("Sessions", func(t *testing.T) { locktest.RunSessions(t, withHistory) })
	t.Run("LockSets", func(t *testing.T) { locktest.RunLockSets(t, withHistory) })
	t.Run("Watches", func(t *testing.T) {
		locktest.RunWatches(t, func(t *testing.T) (locks.Backend, locks.Backend) {
			return withHistory(t), withHistory(t)
		}, dropNameRecord)
	})
}

// TestRedisClusterFIFOAcrossGateways: waiters on three backends, each with
// its own cluster client and subscription, get the lock in queue order.
func TestRedisClusterFIFOAcrossGateways(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	backends := make([]locks.Locker, 3)
	for i := range backends {
		r := openRedis(t, cluster.Client(t), redisbackend.Options{})
		t.Cleanup(func() { r.Close() })
		backends[i] = r
	}
	for range 3 { // locks whose keys land on different nodes
		key := locktest.UniqueKey(t)
		holder := locktest.MustAcquire(t, backends[0], key, locks.AcquireRequest{TTL: time.Minute})
		lockers := []locks.Locker{backends[1], backends[2], backends[0], backends[2]}
		locktest.CheckFIFO(t, backends[0], key, holder, lockers, locktest.QueueInOrder(t, key, lockers...))
	}
}

// TestRedisClusterFollowsMoved: a backend whose slot map is behind the
// cluster's (the slot of a lock moved since the map was loaded) is sent
// MOVED for that lock. Redis refuses with MOVED before it runs anything,
// so the backend sends the call once more, to the node the reply names,
// and the call succeeds: a reshard costs its callers no 503 once it is
// over, however late the client's map follows (go-redis reloads it from
// one node, which may not have heard of the move yet, and then waits
// 200 ms before it reloads again). Each round moves a slot under a map
// that knew the old owner, and checks that the call did meet MOVED.
func TestRedisClusterFollowsMoved(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client(t)
	moved := &movedCounter{}
	client.AddHook(moved)
	r := openRedis(t, client, redisbackend.Options{})
	t.Cleanup(func() { r.Close() })
	ctx := t.Context()
	for round := range 3 {
		// An attempt shows nothing when the map followed the move before
		// the release: go-redis reloads it in the background after a
		// MOVED, and on a busy machine the reload that the last round's
		// MOVED asked for can come after this round's move. Then the
		// round tries again with another lock.
		for attempt := 1; ; attempt++ {
			key := locktest.UniqueKey(t)
			g := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute}) // the map knows the owner
			slot := cluster.KeySlot(t, "{"+key.Namespace+"/"+key.Name+"}")
			cluster.MigrateSlot(t, slot, (cluster.Owner(t, slot)+1)%len(cluster.Nodes))
			before := moved.n.Load()
			if _, err := r.Release(ctx, key, g.Token); err != nil {
				t.Fatalf("round %d: release after the slot moved: %v", round, err)
			}
			met := moved.n.Load() != before
			if _, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute}); err != nil {
				t.Fatalf("round %d: acquire after the release: %v", round, err)
			}
			if met {
				break
			}
			if attempt == 5 {
				t.Fatalf("round %d: %d releases met no MOVED: the map followed each move before the test could show anything", round, attempt)
			}
		}
	}
}

// movedCounter counts the MOVED replies a client's pipelines met.
type movedCounter struct{ n atomic.Int64 }

func (*movedCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*movedCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (m *movedCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if _, ok := redis.IsMovedError(c.Err()); ok {
				m.n.Add(1)
			}
		}
		return err
	}
}
