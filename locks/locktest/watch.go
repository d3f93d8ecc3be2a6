package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunWatches runs the watch cases. newPair returns two backends on one
// store, with a history of HistoryLen events: the changes are made through
// the first, the watches through the second (two gateways, for Redis).
func RunWatches(t *testing.T, newPair func(t *testing.T) (locks.Backend, locks.Backend)) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, a, b locks.Backend, key locks.Key)
	}{
		{"EveryChangeInOrder", testWatchEveryChange},
		{"LongPollEndsOnChangeOrAtItsEnd", testWatchLongPoll},
		{"ResumesFromAnIndex", testWatchResume},
		{"SaysWhenEventsWereLost", testWatchMissed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPair(t)
			tc.test(t, a, b, UniqueKey(t))
		})
	}
}

// RunNoWatches checks that a backend without a history refuses watches.
func RunNoWatches(t *testing.T, b locks.Backend) {
	_, err := b.Watch(t.Context(), UniqueKey(t), -1)
	if !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("watch without a history: got %v, want ErrInvalid", err)
	}
}

// watchNow returns key's index and state now.
func watchNow(t testing.TB, w locks.Watcher, key locks.Key) locks.Change {
	t.Helper()
	c, err := w.Watch(t.Context(), key, -1)
	if err != nil {
		t.Fatalf("watch now: %v", err)
	}
	return c
}

// collect watches key from index after, as a client would (each answer's
// index is the next call's), until it has n events, and sends them, or an
// error, on the channel.
func collect(ctx context.Context, w locks.Watcher, key locks.Key, after int64, n int) <-chan []locks.Event {
	out := make(chan []locks.Event, 1)
	go func() {
		var got []locks.Event
		for len(got) < n {
			c, err := w.Watch(ctx, key, after)
			if err != nil {
				got = append(got, locks.Event{Kind: "error: " + err.Error()})
				break
			}
			if c.Missed {
				got = append(got, locks.Event{Kind: "missed"})
				break
			}
			got = append(got, c.Events...)
			after = c.Index
		}
		out <- got
	}()
	return out
}

// wantEvents checks the kinds of events, in order, and that their indexes
// follow each other from first.
func wantEvents(t testing.TB, got []locks.Event, first int64, kinds ...string) {
	t.Helper()
	var ks []string
	for _, e := range got {
		ks = append(ks, e.Kind)
	}
	if strings.Join(ks, ",") != strings.Join(kinds, ",") {
		t.Fatalf("got events %v, want %v", ks, kinds)
	}
	for i, e := range got {
		if e.Index != first+int64(i) {
			t.Fatalf("event %d (%s): got index %d, want %d", i, e.Kind, e.Index, first+int64(i))
		}
	}
}

func testWatchEveryChange(t *testing.T, a, b locks.Backend, key locks.Key) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := watchNow(t, b, key)
	if start.Index != 0 || start.Held {
		t.Fatalf("a new lock: got index %d, held %t; want 0, free", start.Index, start.Held)
	}
	kinds := []string{"acquired", "value_changed", "released", "handed_over", "broken", "acquired", "expired"}
	events := collect(ctx, b, key, start.Index, len(kinds))

	g := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "one", Value: "v1"})
	if _, err := a.SetValue(ctx, key, g.Token, "v2"); err != nil {
		t.Fatalf("set value: %v", err)
	}
	waiter := AcquireAsync(ctx, a, key, locks.AcquireRequest{TTL: time.Minute, Wait: 10 * time.Second, Subject: "two"})
	WaitUntilQueued(t, a, key, 1)
	if _, err := a.Release(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if r := <-waiter; r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	mustBreak(t, a, key, 1)
	// The last lease ends with no call on the lock: the watch itself must
	// see it end.
	MustAcquire(t, a, key, locks.AcquireRequest{TTL: 150 * time.Millisecond, Subject: "three"})

	got := <-events
	wantEvents(t, got, 1, kinds...)
	if got[1].Value != "v2" || got[3].Subject != "two" || got[4].By != "admin" {
		t.Fatalf("got events %+v; want the value v2, a hand-over to two, a break by admin", got)
	}
	if end := watchNow(t, b, key); end.Index != int64(len(kinds)) || end.Held {
		t.Fatalf("at the end: got index %d, held %t; want %d, free", end.Index, end.Held, len(kinds))
	}
}

func testWatchLongPoll(t *testing.T, a, b locks.Backend, key locks.Key) {
	start := watchNow(t, b, key)
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	c, err := b.Watch(short, key, start.Index)
	if !errors.Is(err, context.DeadlineExceeded) || c.Index != start.Index || len(c.Events) != 0 {
		t.Fatalf("a long-poll with no change: got %+v, %v; want index %d, no events, the deadline", c, err, start.Index)
	}

	type result struct {
		c   locks.Change
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := b.Watch(t.Context(), key, start.Index)
		done <- result{c, err}
	}()
	g := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "poller"})
	r := <-done
	if r.err != nil || !r.c.Held || r.c.Info.FencingToken != g.FencingToken {
		t.Fatalf("a long-poll across an acquire: got %+v, %v; want the lock held by fencing token %d", r.c, r.err, g.FencingToken)
	}
	wantEvents(t, r.c.Events, start.Index+1, "acquired")
	if r.c.Index != start.Index+1 {
		t.Fatalf("got index %d, want %d", r.c.Index, start.Index+1)
	}
}

func testWatchResume(t *testing.T, a, b locks.Backend, key locks.Key) {
	ctx := t.Context()
	g := MustAcquire(t, a, key, req(time.Minute))
	seen := watchNow(t, b, key).Index
	a.Renew(ctx, key, g.Token, time.Minute)
	a.Release(ctx, key, g.Token)
	// A watcher that had seen the acquire, and comes back now: it may
	// get the two events in one answer or in two (another gateway learns
	// of each by its hint), but it gets both, in order.
	got := <-collect(ctx, b, key, seen, 2)
	wantEvents(t, got, seen+1, "renewed", "released")
	if c := watchNow(t, b, key); c.Held || c.Index != seen+2 {
		t.Fatalf("resume: got index %d, held %t; want %d, free", c.Index, c.Held, seen+2)
	}
}

func testWatchMissed(t *testing.T, a, b locks.Backend, key locks.Key) {
	ctx := t.Context()
	for range HistoryLen/2 + 1 {
		g := MustAcquire(t, a, key, req(time.Minute))
		a.Release(ctx, key, g.Token)
	}
	// The first event is no longer kept: a watcher that saw none of them
	// learns that it missed some, and gets those kept.
	c, err := b.Watch(ctx, key, 0)
	if err != nil || !c.Missed || len(c.Events) != HistoryLen || c.Index != HistoryLen+2 {
		t.Fatalf("got %d events, index %d, missed %t, %v; want %d, %d, missed", len(c.Events), c.Index, c.Missed, err, HistoryLen, HistoryLen+2)
	}
	wantEvents(t, c.Events[:2], 3, "acquired", "released")
	// One that saw the second misses nothing.
	if c, err := b.Watch(ctx, key, 2); err != nil || c.Missed || len(c.Events) != HistoryLen {
		t.Fatalf("from index 2: got %d events, missed %t, %v; want %d", len(c.Events), c.Missed, err, HistoryLen)
	}
}
