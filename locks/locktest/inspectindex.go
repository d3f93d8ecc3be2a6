package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// inspectIndex returns the index Inspect answers for key, held or not.
func inspectIndex(t testing.TB, l locks.Locker, key locks.Key) (index int64, held bool) {
	t.Helper()
	info, err := l.Inspect(t.Context(), key)
	if err == nil {
		return info.Index, true
	}
	var nh *locks.NotHeldError
	if !errors.As(err, &nh) {
		t.Fatalf("inspect: got %v, want the holders or a *NotHeldError", err)
	}
	return nh.Index, false
}

// wantInspectIndex checks that Inspect through b answers the index that a
// watch reports, through either backend, and returns it: the index of the
// state Inspect describes. A gateway's watch of a lock hears of a change
// made through another one a moment later (Redis: by its hint), so it
// polls the watches until they report it, for 10s at most.
func wantInspectIndex(t testing.TB, a, b locks.Backend, key locks.Key, held bool, what string) int64 {
	t.Helper()
	got, gotHeld := inspectIndex(t, b, key)
	if gotHeld != held {
		t.Fatalf("%s: inspect got held %t, want %t", what, gotHeld, held)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		wa, wb := watchNow(t, a, key), watchNow(t, b, key)
		if wa.Index == got && wb.Index == got && wa.Held == held && wb.Held == held {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: inspect got index %d, held %t; watches say index %d and %d, held %t and %t; want the same",
				what, got, gotHeld, wa.Index, wb.Index, wa.Held, wb.Held)
		}
		time.Sleep(2 * time.Millisecond) // polling for a hint to arrive, not synchronising
	}
}

// pollFrom long-polls key from index after, on a goroutine: its answer
// comes on the channel.
func pollFrom(ctx context.Context, w locks.Watcher, key locks.Key, after int64) <-chan locks.Change {
	out := make(chan locks.Change, 1)
	go func() {
		c, err := w.Watch(ctx, key, after)
		if err != nil {
			c.Events = append(c.Events, locks.Event{Kind: "error: " + err.Error()})
		}
		out <- c
	}()
	return out
}

// wantNoChange checks that a long-poll of key from index after waits: it
// ends with its deadline, with no events.
func wantNoChange(t testing.TB, w locks.Watcher, key locks.Key, after int64, what string) {
	t.Helper()
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	c, err := w.Watch(short, key, after)
	if !errors.Is(err, context.DeadlineExceeded) || c.Index != after || len(c.Events) != 0 {
		t.Fatalf("%s: a long-poll from inspect's index %d got index %d, %d events, %v; want it to wait for a change", what, after, c.Index, len(c.Events), err)
	}
}

// testInspectIndex: Inspect answers the lock's index, held or free (#39),
// the one a watch reports: it moves by one with each change, and a
// long-poll from it answers at the next change, with that change. A lease
// that ended with no call on the lock since counts as recorded.
func testInspectIndex(t *testing.T, a, b locks.Backend, key locks.Key) {
	ctx := t.Context()
	if i := wantInspectIndex(t, a, b, key, false, "a lock never taken"); i != 0 {
		t.Fatalf("a lock never taken: got index %d, want 0", i)
	}

	g := MustAcquire(t, a, key, req(time.Minute))
	acquired := wantInspectIndex(t, a, b, key, true, "after an acquire")
	if acquired < clock2020 {
		t.Fatalf("after the first acquire: got index %d, want the clock in microseconds", acquired)
	}
	wantNoChange(t, b, key, acquired, "held")
	polled := pollFrom(ctx, b, key, acquired)
	if _, err := a.Renew(ctx, key, g.Token, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	c := <-polled
	wantEvents(t, c.Events, acquired+1, "renewed")
	if c.Missed || !c.Held {
		t.Fatalf("a long-poll across a renewal: got missed %t, held %t; want neither missed nor free", c.Missed, c.Held)
	}
	if i := wantInspectIndex(t, a, b, key, true, "after a renewal"); i != acquired+1 {
		t.Fatalf("after a renewal: got index %d, want %d", i, acquired+1)
	}

	polled = pollFrom(ctx, b, key, acquired+1)
	if _, err := a.Release(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	c = <-polled
	wantEvents(t, c.Events, acquired+2, "released")
	released := wantInspectIndex(t, a, b, key, false, "after the release")
	if released != acquired+2 {
		t.Fatalf("after the release: got index %d, want %d", released, acquired+2)
	}
	wantNoChange(t, b, key, released, "free")

	// An exclusive lease that ends with no call on the lock: Inspect,
	// which writes nothing, answers the index of its expiry.
	MustAcquire(t, a, key, req(150*time.Millisecond))
	WaitUntilFree(t, b, key)
	if i, _ := inspectIndex(t, b, key); i != released+2 {
		t.Fatalf("after a lease that ended unreleased: got index %d, want %d (the acquire's and the expiry's)", i, released+2)
	}
	expired := wantInspectIndex(t, a, b, key, false, "after a lease that ended unreleased")
	wantNoChange(t, b, key, expired, "expired")

	// The same of one shared lease of two.
	long := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "long", Mode: locks.Shared})
	MustAcquire(t, a, key, locks.AcquireRequest{TTL: 150 * time.Millisecond, Subject: "short", Mode: locks.Shared})
	waitUntilHolders(t, b, key, 1)
	if i, _ := inspectIndex(t, b, key); i != expired+3 {
		t.Fatalf("after one of two shared leases ended unreleased: got index %d, want %d (two acquires, an expiry)", i, expired+3)
	}
	shared := wantInspectIndex(t, a, b, key, true, "after one of two shared leases ended unreleased")
	polled = pollFrom(ctx, b, key, shared)
	if _, err := a.Release(ctx, key, long.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	c = <-polled
	wantEvents(t, c.Events, shared+1, "released")

	// A released grant whose min hold keeps the lock: free, with the
	// release's index, and until when.
	g = MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "cron", MinHold: time.Minute})
	if _, err := a.Release(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	resting := wantInspectIndex(t, a, b, key, false, "released under a min hold")
	if resting != shared+3 {
		t.Fatalf("released under a min hold: got index %d, want %d (an acquire and its release)", resting, shared+3)
	}
	var nh *locks.NotHeldError
	if _, err := b.Inspect(ctx, key); !errors.As(err, &nh) || nh.FreeAt.IsZero() || nh.Index != resting {
		t.Fatalf("released under a min hold: inspect got %v, want a NotHeldError with index %d and until when", err, resting)
	}
	wantNoChange(t, b, key, resting, "released under a min hold")
}
