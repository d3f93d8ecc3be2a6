package embedded_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/locktest"
)

// TestMemorySemaphoreIndexOutlivesIdleness: an idle semaphore keeps its
// index until it has been idle for a day, then is forgotten (its index
// 0), and its next change starts the index above every one it had; a
// semaphore in use is never forgotten.
func TestMemorySemaphoreIndexOutlivesIdleness(t *testing.T) {
	m := embedded.New(embedded.Options{})
	ctx := t.Context()
	idle, used := locks.Key{Namespace: "semindex", Name: "idle"}, locks.Key{Namespace: "semindex", Name: "used"}
	req := locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Hour, Subject: "test"}, Limit: 2}
	g := locktest.MustAcquirePermit(t, m, idle, req)
	if _, err := m.ReleasePermit(ctx, idle, g.Token); err != nil {
		t.Fatal(err)
	}
	locktest.MustAcquirePermit(t, m, used, req)
	index := func(key locks.Key) int64 {
		t.Helper()
		info, err := m.InspectSemaphore(ctx, key)
		var nh *locks.NotHeldError
		if errors.As(err, &nh) {
			return nh.Index
		}
		if err != nil {
			t.Fatal(err)
		}
		return info.Index
	}
	last, held := index(idle), index(used)

	m.PruneSemaphores(time.Now().Add(time.Hour))
	if i := index(idle); i != last {
		t.Fatalf("idle for an hour: got index %d, want %d, kept", i, last)
	}
	m.PruneSemaphores(time.Now().Add(25 * time.Hour))
	if i := index(idle); i != 0 {
		t.Fatalf("idle for a day: got index %d, want 0, forgotten", i)
	}
	if i := index(used); i != held {
		t.Fatalf("a semaphore in use, after the sweep: got index %d, want %d", i, held)
	}
	locktest.MustAcquirePermit(t, m, idle, req)
	if i := index(idle); i <= last {
		t.Fatalf("the first change after it was forgotten: got index %d, want above %d", i, last)
	}
}
