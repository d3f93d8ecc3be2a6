package locks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
)

// The ticket cases of the conformance suite, on both backends: two Redis
// backends on one Redis stand for two gateways.
func TestRedisTickets(t *testing.T) {
	srv := redistest.Start(t)
	locktest.RunTickets(t, func(t *testing.T, liveness time.Duration) (a, b locktest.TicketBackend) {
		return newRedis(t, srv, locks.RedisOptions{TicketLiveness: liveness}), newRedis(t, srv, locks.RedisOptions{TicketLiveness: liveness})
	})
}

func TestMemoryTickets(t *testing.T) {
	locktest.RunTickets(t, func(t *testing.T, liveness time.Duration) (a, b locktest.TicketBackend) {
		m := locks.NewMemory(locks.MemoryOptions{TicketLiveness: liveness})
		return m, m
	})
}

// TestTicketTokenNotInRedis: Redis holds the ticket token's hash, never
// the token.
func TestTicketTokenNotInRedis(t *testing.T) {
	srv := redistest.Start(t)
	b := newRedis(t, srv, locks.RedisOptions{})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
	if err != nil || tk.Grant != nil {
		t.Fatalf("open ticket: %+v, %v; want a ticket", tk, err)
	}
	keys, err := admin.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		dump, err := admin.Dump(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(k+dump, tk.Token) {
			t.Fatalf("key %s holds the ticket token", k)
		}
	}
}
