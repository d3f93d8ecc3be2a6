package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// HistoryLen is the history length RunHistory's backends are made with.
const HistoryLen = 10

// RunHistory runs the lock-history cases against backends newBackend
// makes with a history of HistoryLen events.
func RunHistory(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, key locks.Key)
	}{
		{"EachCallIsRecorded", testHistoryCalls},
		{"AnUnreleasedLeaseIsRecordedExpiredOnce", testHistoryExpired},
		{"AHandOverIsRecorded", testHistoryHandOver},
		{"ASharedLeaseEndingIsRecorded", testHistorySharedExpired},
		{"TheLastSharedLeaseEndingIsRecorded", testHistoryLastSharedExpired},
		{"ASharedLockSaysWhenItsLeaseEnds", testHistorySharedRetry},
		{"TheHistoryIsCapped", testHistoryCapped},
		{"TheHistoryKeepsItsLastEventsCutAfterCut", testHistoryCuts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueKey(t))
		})
	}
}

// kinds returns the kinds of events, newest first, as "a,b,c".
func kinds(t testing.TB, b locks.Backend, key locks.Key) (string, []locks.Event) {
	t.Helper()
	events, err := b.History(context.Background(), key)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var ks []string
	for _, e := range events {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ","), events
}

func testHistoryCalls(t *testing.T, b locks.Backend, key locks.Key) {
	if got, _ := kinds(t, b, key); got != "" {
		t.Fatalf("a lock never taken: got %q, want no events", got)
	}
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "alice", Owner: "job-1"})
	if _, err := b.Renew(context.Background(), key, g.Token, 0); err != nil {
		t.Fatal(err)
	}
	inner, err := b.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	for _, hold := range []string{inner.Hold, ""} {
		if _, err := b.ReleaseHold(context.Background(), key, g.Token, hold); err != nil {
			t.Fatal(err)
		}
	}
	got, events := kinds(t, b, key)
	if got != "released,re_entered,renewed,acquired" {
		t.Fatalf("got %q, want released,re_entered,renewed,acquired", got)
	}
	for _, e := range events {
		if e.Subject != "alice" || e.Owner != "job-1" || e.FencingToken != g.FencingToken ||
			e.At.Before(time.Now().Add(-time.Minute)) || e.At.After(time.Now().Add(time.Minute)) {
			t.Fatalf("event %+v: want alice, job-1, fence %d, about now", e, g.FencingToken)
		}
	}
	for i := 1; i < len(events); i++ {
		if events[i].At.After(events[i-1].At) {
			t.Fatalf("events not newest first: %+v", events)
		}
	}
}

func testHistoryExpired(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: 100 * time.Millisecond, Subject: "bob"})
	WaitUntilFree(t, b, key)
	// Before anything else touches the lock, and after.
	for _, want := range []string{"expired,acquired", "released,acquired,expired,acquired"} {
		got, events := kinds(t, b, key)
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		for _, e := range events {
			if e.Kind == "expired" && (e.FencingToken != g.FencingToken || e.Subject != "bob" ||
				e.At.Before(g.ExpiresAt.Add(-50*time.Millisecond)) || e.At.After(g.ExpiresAt.Add(5*time.Second))) {
				t.Fatalf("expired event %+v: want bob's grant %d, at its lease's end %v", e, g.FencingToken, g.ExpiresAt)
			}
		}
		next := MustAcquire(t, b, key, req(time.Minute))
		if _, err := b.Release(context.Background(), key, next.Token); err != nil {
			t.Fatal(err)
		}
	}
}

func testHistoryHandOver(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "carol"})
	w := AcquireAsync(context.Background(), b, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "dave"})
	WaitUntilQueued(t, b, key, 1)
	if _, err := b.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := <-w
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got, events := kinds(t, b, key)
	if got != "handed_over,released,acquired" || events[0].Subject != "dave" || events[0].FencingToken != res.Grant.FencingToken {
		t.Fatalf("got %q %+v, want handed_over to dave, released, acquired", got, events)
	}
	b.Release(context.Background(), key, res.Grant.Token)
}

func testHistorySharedExpired(t *testing.T, b locks.Backend, key locks.Key) {
	// frank first: the lock is held shared for his minute whenever erin's
	// lease ends. Taken after hers, his acquire came when her 100 ms had
	// run out already on a busy machine (load 25), and found a free lock.
	stays := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "frank", Mode: locks.Shared})
	gone := MustAcquire(t, b, key, locks.AcquireRequest{TTL: 100 * time.Millisecond, Subject: "erin", Mode: locks.Shared})
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := b.Inspect(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 100ms shared lease did not end within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
	// The next call on the lock records the ended lease, before its own event.
	if _, err := b.Renew(context.Background(), key, stays.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, events := kinds(t, b, key)
	if got != "renewed,expired,acquired,acquired" || events[1].Subject != "erin" || events[1].FencingToken != gone.FencingToken {
		t.Fatalf("got %q %+v, want erin's grant %d expired between the acquires and the renew", got, events, gone.FencingToken)
	}
	b.Release(context.Background(), key, stays.Token)
}

// testHistoryLastSharedExpired: the lease of a lock's last shared holder
// ends unreleased, and nobody calls on the lock until it is free (on
// Redis, until its keys would have expired with that lease): the next
// call still records it.
func testHistoryLastSharedExpired(t *testing.T, b locks.Backend, key locks.Key) {
	gone := MustAcquire(t, b, key, locks.AcquireRequest{TTL: 100 * time.Millisecond, Subject: "erin", Mode: locks.Shared})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := b.Inspect(context.Background(), key)
		if errors.Is(err, locks.ErrNotHeld) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the 100ms shared lease did not end within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
	next := MustAcquire(t, b, key, req(time.Minute))
	got, events := kinds(t, b, key)
	if got != "acquired,expired,acquired" || events[1].Subject != "erin" || events[1].FencingToken != gone.FencingToken {
		t.Fatalf("got %q %+v, want erin's shared grant %d expired between the two acquires", got, events, gone.FencingToken)
	}
	b.Release(context.Background(), key, next.Token)
}

// testHistorySharedRetry: a lock held shared, with a history, refuses an
// exclusive acquire with the shared lease's end as its Retry-After, not
// the end of the history's keep (on Redis the lock's keys outlive the
// shared leases by it: see testHistoryLastSharedExpired).
func testHistorySharedRetry(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "reader", Mode: locks.Shared})
	_, err := b.Acquire(context.Background(), key, req(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) || held.RetryAfter > time.Minute {
		t.Fatalf("an exclusive acquire beside a shared lease of a minute: got %v, want held, retry within a minute", err)
	}
	b.Release(context.Background(), key, g.Token)
}

func testHistoryCapped(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, req(time.Minute))
	for range HistoryLen + 5 {
		if _, err := b.Renew(context.Background(), key, g.Token, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, events := kinds(t, b, key)
	if len(events) != HistoryLen || strings.Contains(got, "acquired") {
		t.Fatalf("got %d events (%q), want the last %d", len(events), got, HistoryLen)
	}
	b.Release(context.Background(), key, g.Token)
}

// testHistoryCuts: through many cuts of a history that keeps the last
// HistoryLen events (a renewal adds one event, a release and an acquire
// one each), the history always shows exactly its newest HistoryLen
// events, their indexes one apart, and the newest the latest call's.
func testHistoryCuts(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	g := MustAcquire(t, b, key, req(time.Minute))
	events := 1
	_, evs := kinds(t, b, key)
	first := evs[0].Index
	for round := range 6 * HistoryLen {
		want := "renewed"
		if round%3 == 2 {
			if _, err := b.Release(ctx, key, g.Token); err != nil {
				t.Fatal(err)
			}
			g = MustAcquire(t, b, key, req(time.Minute))
			events += 2
			want = "acquired"
		} else {
			if _, err := b.Renew(ctx, key, g.Token, 0); err != nil {
				t.Fatal(err)
			}
			events++
		}
		got, evs := kinds(t, b, key)
		if len(evs) != min(events, HistoryLen) || evs[0].Kind != want || evs[0].FencingToken != g.FencingToken {
			t.Fatalf("round %d, %d events so far: got %d (%q), want the newest %d, the newest %s with fencing token %d",
				round, events, len(evs), got, min(events, HistoryLen), want, g.FencingToken)
		}
		for k, e := range evs {
			if e.Index != first+int64(events-1-k) {
				t.Fatalf("round %d: event %d (%s) has index %d, want %d", round, k, e.Kind, e.Index, first+int64(events-1-k))
			}
		}
	}
	b.Release(ctx, key, g.Token)
}

// RunNoHistory checks that a backend made without a history keeps none.
func RunNoHistory(t *testing.T, b locks.Backend) {
	key := UniqueKey(t)
	g := MustAcquire(t, b, key, req(time.Minute))
	b.Release(context.Background(), key, g.Token)
	events, err := b.History(context.Background(), key)
	if err != nil || len(events) != 0 {
		t.Fatalf("history of a backend without one: got %v, %v", events, err)
	}
}
