package locktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunWatches runs the watch cases. newPair returns two backends on one
// store, with a history of HistoryLen events: the changes are made through
// the first, the watches through the second (two gateways, for Redis).
// forget makes the store lose key's history and index, through the first
// backend, as the store would lose them on its own (Redis: the name record
// expired, or Redis restarted empty; embedded: an idle history pruned).
func RunWatches(t *testing.T, newPair func(t *testing.T) (locks.Backend, locks.Backend), forget func(t *testing.T, b locks.Backend, key locks.Key)) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, a, b locks.Backend, key locks.Key)
	}{
		{"EveryChangeInOrder", testWatchEveryChange},
		{"LongPollEndsOnChangeOrAtItsEnd", testWatchLongPoll},
		{"AnEndedWaitAnswersTheStateKnown", testWatchEndedWait},
		{"ResumesFromAnIndex", testWatchResume},
		{"SaysWhenEventsWereLost", testWatchMissed},
		{"InspectTellsTheIndex", testInspectIndex},
		{"StatesTheQueuesPriorities", testWatchQueuePriorities},
		{"SaysMissedAfterTheHistoryWasLost", func(t *testing.T, a, b locks.Backend, key locks.Key) {
			testWatchLostHistory(t, a, b, key, forget)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPair(t)
			tc.test(t, a, b, UniqueKey(t))
		})
	}
}

// RunNoWatches checks that a backend without a history refuses watches,
// and that Inspect answers index 0, held or not.
func RunNoWatches(t *testing.T, b locks.Backend) {
	key := UniqueKey(t)
	_, err := b.Watch(t.Context(), key, -1)
	if !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("watch without a history: got %v, want ErrInvalid", err)
	}
	g := MustAcquire(t, b, key, req(time.Minute))
	if i, held := inspectIndex(t, b, key); i != 0 || !held {
		t.Fatalf("inspect without a history, held: got index %d, held %t; want 0, held", i, held)
	}
	if _, err := b.Release(t.Context(), key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if i, held := inspectIndex(t, b, key); i != 0 || held {
		t.Fatalf("inspect without a history, free: got index %d, held %t; want 0, free", i, held)
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
// follow each other from first; first 0 is a history's first event, whose
// index is the backend's clock in microseconds (see locks.Watcher): any
// above the year 2020's.
func wantEvents(t testing.TB, got []locks.Event, first int64, kinds ...string) {
	t.Helper()
	var ks []string
	for _, e := range got {
		ks = append(ks, e.Kind)
	}
	if strings.Join(ks, ",") != strings.Join(kinds, ",") {
		t.Fatalf("got events %v, want %v", ks, kinds)
	}
	if first == 0 && len(got) > 0 {
		if first = got[0].Index; first < clock2020 {
			t.Fatalf("the history's first event: got index %d, want the clock in microseconds", first)
		}
	}
	for i, e := range got {
		if e.Index != first+int64(i) {
			t.Fatalf("event %d (%s): got index %d, want %d", i, e.Kind, e.Index, first+int64(i))
		}
	}
}

// clock2020 is 2020-01-01 in microseconds since 1970.
const clock2020 = 1577836800 * 1000000

// nextIndex is the index of the event after index i: 0 (the first of a
// history, see wantEvents) when i is 0.
func nextIndex(i int64) int64 {
	if i == 0 {
		return 0
	}
	return i + 1
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
	wantEvents(t, got, 0, kinds...)
	if got[1].Value != "v2" || got[3].Subject != "two" || got[4].By != "admin" {
		t.Fatalf("got events %+v; want the value v2, a hand-over to two, a break by admin", got)
	}
	if end, last := watchNow(t, b, key), got[len(got)-1].Index; end.Index != last || end.Held {
		t.Fatalf("at the end: got index %d, held %t; want %d, free", end.Index, end.Held, last)
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
	wantEvents(t, r.c.Events, nextIndex(start.Index), "acquired")
	if r.c.Index != r.c.Events[0].Index || r.c.Missed {
		t.Fatalf("got index %d, missed %t; want %d, none missed", r.c.Index, r.c.Missed, r.c.Events[0].Index)
	}
}

// testWatchEndedWait: a watch whose ctx ended before it began (a
// long-poll's wait of a millisecond on a busy machine), on a lock whose
// state the backend knows (a first look read it), answers that state with
// ctx's error, never ErrUnavailable: the wait ended, the backend did not
// fail. Count-based: each of the rounds must.
func testWatchEndedWait(t *testing.T, a, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "watched"})
	now := watchNow(t, b, key)
	ended, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	const rounds = 50
	for i := range rounds {
		for _, after := range []int64{now.Index, 1} { // current, behind
			c, err := b.Watch(ended, key, after)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locks.ErrUnavailable) || c.Index != now.Index || !c.Held || c.Info.FencingToken != g.FencingToken {
				t.Fatalf("round %d of %d, a watch from index %d whose ctx had ended: got index %d, held %t (fencing token %d), %v; want index %d, held by fencing token %d, the deadline alone",
					i+1, rounds, after, c.Index, c.Held, c.Info.FencingToken, err, now.Index, g.FencingToken)
			}
		}
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
	var first int64 // the index of the first event
	for range HistoryLen/2 + 1 {
		g := MustAcquire(t, a, key, req(time.Minute))
		if first == 0 {
			first = watchNow(t, a, key).Index
		}
		a.Release(ctx, key, g.Token)
	}
	// The first event is no longer kept: a watcher that saw none of them
	// learns that it missed some, and gets those kept.
	c, err := b.Watch(ctx, key, 0)
	if last := first + HistoryLen + 1; err != nil || !c.Missed || len(c.Events) != HistoryLen || c.Index != last {
		t.Fatalf("got %d events, index %d, missed %t, %v; want %d, %d, missed", len(c.Events), c.Index, c.Missed, err, HistoryLen, last)
	}
	wantEvents(t, c.Events[:2], first+2, "acquired", "released")
	// One that saw the second misses nothing.
	if c, err := b.Watch(ctx, key, first+1); err != nil || c.Missed || len(c.Events) != HistoryLen {
		t.Fatalf("from the second event: got %d events, missed %t, %v; want %d", len(c.Events), c.Missed, err, HistoryLen)
	}
}

// testWatchLostHistory: a lock's history and index are lost (see
// RunWatches), and as many events follow as there were before. A watcher
// that resumes from the index it had learns at once that it missed
// events: the index never repeats, so it cannot mistake the new events for
// those it saw, nor see nothing at all (finding 3 of issue 36).
func testWatchLostHistory(t *testing.T, a, b locks.Backend, key locks.Key, forget func(t *testing.T, b locks.Backend, key locks.Key)) {
	ctx := t.Context()
	g := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "one", Value: "v1"})
	if _, err := a.Release(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The watcher's gateway has seen both events (it went away since: it
	// comes back through another).
	seen := watchNow(t, a, key).Index
	forget(t, a, key)
	// Someone else takes the lock and sets its value: two events, as
	// many as before the loss.
	g = MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "two", Value: "v2"})
	if _, err := a.SetValue(ctx, key, g.Token, "v3"); err != nil {
		t.Fatalf("set value: %v", err)
	}
	// A watch that has changes to report answers after one read: the
	// deadline only stops one that would wait for ever.
	poll, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := b.Watch(poll, key, seen)
	if err != nil || !c.Missed || !c.Held || c.Index <= seen || c.Info.FencingToken != g.FencingToken {
		t.Fatalf("resumed from index %d after the history was lost: got index %d, %d events, missed %t, held %t (fencing token %d), %v; want an index above %d, missed, held by fencing token %d",
			seen, c.Index, len(c.Events), c.Missed, c.Held, c.Info.FencingToken, err, seen, g.FencingToken)
	}
	var kinds []string
	for _, e := range c.Events {
		kinds = append(kinds, e.Kind)
		if e.Index <= seen {
			t.Fatalf("event %s: got index %d, want above %d (the index before the loss)", e.Kind, e.Index, seen)
		}
	}
	if strings.Join(kinds, ",") != "acquired,value_changed" || c.Events[1].Value != "v3" {
		t.Fatalf("got events %v (%+v), want acquired,value_changed to v3", kinds, c.Events)
	}
}

// testWatchQueuePriorities: a watch's state describes the queue's
// priorities as Inspect does: in serving order when anyone waits, both at
// once (index -1) and in the answer to a change.
func testWatchQueuePriorities(t *testing.T, a, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, a, key, req(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var waiters []<-chan Result
	for i, p := range []int{0, 4, 2} {
		waiters = append(waiters, AcquireAsync(ctx, a, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "tester", Priority: p}))
		WaitUntilQueued(t, a, key, i+1)
	}
	c := watchNow(t, b, key)
	if want := []int{4, 2, 0}; !c.Held || !slices.Equal(c.Info.QueuePriorities, want) {
		t.Fatalf("watch now: held %t, queue priorities %v; want held, %v", c.Held, c.Info.QueuePriorities, want)
	}
	if _, err := a.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	next, err := b.Watch(ctx, key, c.Index)
	if want := []int{2, 0}; err != nil || !next.Held || !slices.Equal(next.Info.QueuePriorities, want) {
		t.Fatalf("the change of the hand-off: %+v, %v; want held, queue priorities %v", next, err, want)
	}
	if res := <-waiters[1]; res.Err != nil {
		t.Fatalf("the priority-4 waiter: %v", res.Err)
	}
}
