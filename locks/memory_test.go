package locks_test

import (
	"testing"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
)

func TestMemoryConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locks.Locker { return locks.NewMemory(locks.MemoryOptions{}) })
}

func TestMemorySemaphoreConformance(t *testing.T) {
	locktest.RunSemaphores(t, func(t *testing.T) locks.Backend { return locks.NewMemory(locks.MemoryOptions{}) })
}

func TestMemoryLockDelay(t *testing.T) {
	locktest.RunLockDelay(t, func(t *testing.T) locks.Locker {
		return locks.NewMemory(locks.MemoryOptions{LockDelay: locktest.LockDelay})
	})
}

func TestMemorySharedCap(t *testing.T) {
	locktest.RunSharedCap(t, func(t *testing.T) locks.Locker {
		return locks.NewMemory(locks.MemoryOptions{MaxSharedHolders: locktest.SharedCap})
	})
}

func TestMemoryListConformance(t *testing.T) {
	locktest.RunList(t, func(t *testing.T) locks.Backend { return locks.NewMemory(locks.MemoryOptions{}) })
}

func TestMemoryHistory(t *testing.T) {
	locktest.RunHistory(t, func(t *testing.T) locks.Backend {
		return locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
	})
	locktest.RunNoHistory(t, locks.NewMemory(locks.MemoryOptions{}))
}

func TestMemoryBreak(t *testing.T) {
	locktest.RunBreak(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		m := locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
		return m, m
	})
}

func TestMemoryValues(t *testing.T) {
	locktest.RunValues(t, func(t *testing.T) locks.Backend {
		return locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
	})
}

func TestMemorySessions(t *testing.T) {
	locktest.RunSessions(t, func(t *testing.T) locks.Backend {
		return locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
	})
}

func TestMemoryLockSets(t *testing.T) {
	locktest.RunLockSets(t, func(t *testing.T) locks.Backend {
		return locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
	})
}

func TestMemoryWatches(t *testing.T) {
	locktest.RunWatches(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		m := locks.NewMemory(locks.MemoryOptions{History: locktest.HistoryLen})
		return m, m
	})
	locktest.RunNoWatches(t, locks.NewMemory(locks.MemoryOptions{}))
}
