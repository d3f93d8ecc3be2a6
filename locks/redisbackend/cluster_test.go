package redisbackend_test

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisClusterConformance runs the whole suite on a three-master Redis
// Cluster: every key a script touches shares the lock's hash tag, and
// hand-offs reach the waiter's gateway whichever node it subscribed on.
func TestRedisClusterConformance(t *testing.T) {
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
