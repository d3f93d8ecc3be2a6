package embedded_test

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/locktest"
)

func TestMemoryConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locks.Locker { return embedded.New(embedded.Options{}) })
}

func TestMemorySemaphoreConformance(t *testing.T) {
	locktest.RunSemaphores(t, func(t *testing.T) locks.Backend { return embedded.New(embedded.Options{}) })
}

func TestMemoryLockDelay(t *testing.T) {
	locktest.RunLockDelay(t, func(t *testing.T) locks.Locker {
		return embedded.New(embedded.Options{LockDelay: locktest.LockDelay})
	})
}

func TestMemorySharedCap(t *testing.T) {
	locktest.RunSharedCap(t, func(t *testing.T) locks.Locker {
		return embedded.New(embedded.Options{MaxSharedHolders: locktest.SharedCap})
	})
}

func TestMemoryListConformance(t *testing.T) {
	locktest.RunList(t, func(t *testing.T) locks.Backend { return embedded.New(embedded.Options{}) })
}

func TestMemoryHistory(t *testing.T) {
	locktest.RunHistory(t, func(t *testing.T) locks.Backend {
		return embedded.New(embedded.Options{History: locktest.HistoryLen})
	})
	locktest.RunNoHistory(t, embedded.New(embedded.Options{}))
}

func TestMemoryBreak(t *testing.T) {
	locktest.RunBreak(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		m := embedded.New(embedded.Options{History: locktest.HistoryLen})
		return m, m
	})
}

func TestMemoryValues(t *testing.T) {
	locktest.RunValues(t, func(t *testing.T) locks.Backend {
		return embedded.New(embedded.Options{History: locktest.HistoryLen})
	})
}

func TestMemorySessions(t *testing.T) {
	locktest.RunSessions(t, func(t *testing.T) locks.Backend {
		return embedded.New(embedded.Options{History: locktest.HistoryLen})
	})
}

func TestMemoryLockSets(t *testing.T) {
	locktest.RunLockSets(t, func(t *testing.T) locks.Backend {
		return embedded.New(embedded.Options{History: locktest.HistoryLen})
	})
}

func TestMemoryWatches(t *testing.T) {
	locktest.RunWatches(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		m := embedded.New(embedded.Options{History: locktest.HistoryLen})
		return m, m
	}, func(t *testing.T, b locks.Backend, key locks.Key) {
		b.(*embedded.Backend).ForgetHistory(key)
	})
	locktest.RunNoWatches(t, embedded.New(embedded.Options{}))
}

func TestMemoryTickets(t *testing.T) {
	locktest.RunTickets(t, func(t *testing.T, liveness time.Duration) (a, b locktest.TicketBackend) {
		m := embedded.New(embedded.Options{TicketLiveness: liveness})
		return m, m
	})
}

func TestMemoryIdempotencyConformance(t *testing.T) {
	locktest.RunIdempotency(t, func(t *testing.T) locks.Backend { return embedded.New(embedded.Options{}) })
}

func TestMemoryMaxHold(t *testing.T) {
	locktest.RunMaxHold(t, func(t *testing.T) locks.Backend {
		return embedded.New(embedded.Options{History: locktest.HistoryLen})
	})
}

func TestMemoryPriority(t *testing.T) {
	locktest.RunPriority(t, func(t *testing.T, aging time.Duration) locks.Backend {
		return embedded.New(embedded.Options{PriorityAging: aging})
	})
}
