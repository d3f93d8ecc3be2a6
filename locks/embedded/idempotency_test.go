package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// TestMemoryIdempotencyRenewKeepsRecord: as renew.lua, reenter.lua and
// sem_renew.lua do in Redis, a renewal keeps the key remembered until
// IdempotencyGrace after the new lease.
func TestMemoryIdempotencyRenewKeepsRecord(t *testing.T) {
	m := New(Options{})
	ctx := context.Background()
	key := locks.Key{Namespace: "test", Name: "renew-keeps"}
	r := locks.AcquireRequest{TTL: time.Minute, Subject: "s"}
	g, err := m.AcquireOnce(ctx, key, r, "k")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := m.AcquirePermitOnce(ctx, key, locks.SemaphoreRequest{AcquireRequest: r, Limit: 2}, "k")
	if err != nil {
		t.Fatal(err)
	}
	remembered := func(sem bool, lease time.Duration) {
		t.Helper()
		m.mu.Lock()
		defer m.mu.Unlock()
		for id, rec := range m.idem.records {
			if id.sem != sem {
				continue
			}
			left := time.Until(rec.expires)
			if low := lease + locks.IdempotencyGrace - 5*time.Second; left < low || left > lease+locks.IdempotencyGrace {
				t.Fatalf("sem %t: remembered for %s, want %s to %s", sem, left, low, lease+locks.IdempotencyGrace)
			}
		}
	}
	remembered(false, time.Minute)
	if _, err := m.Renew(ctx, key, g.Token, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	remembered(false, 10*time.Minute)
	if _, err := m.Reenter(ctx, key, g.Token, 20*time.Minute, locks.Exclusive); err != nil {
		t.Fatal(err)
	}
	remembered(false, 20*time.Minute)
	if _, err := m.RenewPermit(ctx, key, sg.Token, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	remembered(true, 10*time.Minute)
}
