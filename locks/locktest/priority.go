package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunPriority runs the suite of priority waiting (AcquireRequest.Priority,
// #39): a higher priority is served first, arrival order within one
// priority, tickets, shared waiters and permits included, and every aging period of
// waiting raises a waiter one level, so that none waits forever. newBackend
// returns a backend whose PriorityAging is aging.
func RunPriority(t *testing.T, newBackend func(t *testing.T, aging time.Duration) locks.Backend) {
	for _, tc := range []struct {
		name  string
		aging time.Duration
		test  func(t *testing.T, b locks.Backend, key locks.Key, aging time.Duration)
	}{
		{"NineServedBeforeTenEarlierZeros", time.Hour, testPriorityNineFirst},
		{"HigherFirstFIFOWithinOne", time.Hour, testPriorityOrder},
		{"TicketRanksByItsPriority", time.Hour, testPriorityTicket},
		{"SharedWaiterRanksByItsPriority", time.Hour, testPriorityShared},
		{"PermitWaiterRanksByItsPriority", time.Hour, testPriorityPermit},
		{"PermitQueueShowsPriorities", time.Hour, testPriorityPermitQueue},
		{"BadPrioritiesRefused", time.Hour, testPriorityInvalid},
		{"AgingServesALowPriorityWaiter", time.Second, testPriorityAging},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t, tc.aging), UniqueKey(t), tc.aging)
		})
	}
}

// queueWaiters queues one waiter per priority in prios, each after the one
// before has queued, named by its index as owner label ("w0", "w1", ...),
// and returns their results by index.
func queueWaiters(t testing.TB, l locks.Locker, key locks.Key, prios ...int) []<-chan Result {
	t.Helper()
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var out []<-chan Result
	for i, p := range prios {
		out = append(out, AcquireAsync(t.Context(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute,
			Subject: "tester", Owner: fmt.Sprintf("w%d", i), Priority: p}))
		WaitUntilQueued(t, l, key, info.Waiters+i+1)
	}
	return out
}

// serveInOrder releases holder, and checks that the waiters get the lock
// one by one in the order want names (indexes into waiters), each
// releasing it in turn.
func serveInOrder(t testing.TB, l locks.Locker, key locks.Key, holder locks.Grant, waiters []<-chan Result, want []int) {
	t.Helper()
	if _, err := l.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range want {
		info := waitForInfo(t, l, key, "the next waiter to hold the lock", func(info locks.Info, err error) bool {
			return err == nil && info.Owner != ""
		})
		var i int
		if _, err := fmt.Sscanf(info.Owner, "w%d", &i); err != nil || i >= len(waiters) {
			t.Fatalf("held by %q, want one of the waiters", info.Owner)
		}
		got = append(got, i)
		res := <-waiters[i]
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		if _, err := l.Release(context.Background(), key, res.Grant.Token); err != nil {
			t.Fatalf("waiter %d release: %v", i, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("served in the order %v, want %v", got, want)
	}
}

// testPriorityNineFirst is #39's acceptance: ten waiters at priority 0 and
// then one at priority 9: the priority-9 waiter is served next, then the
// ten in their order; Inspect shows the queue's priorities in serving
// order.
func testPriorityNineFirst(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	holder := MustAcquire(t, b, key, req(time.Minute))
	info, err := b.Inspect(context.Background(), key)
	if err != nil || info.QueuePriorities != nil {
		t.Fatalf("nobody waits: got queue priorities %v (%v), want none", info.QueuePriorities, err)
	}
	waiters := queueWaiters(t, b, key, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9)
	info, err = b.Inspect(context.Background(), key)
	if want := []int{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; err != nil || !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("got queue priorities %v (%v), want %v", info.QueuePriorities, err, want)
	}
	serveInOrder(t, b, key, holder, waiters, []int{10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
}

// testPriorityOrder: higher priorities first, arrival order within one.
func testPriorityOrder(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	holder := MustAcquire(t, b, key, req(time.Minute))
	waiters := queueWaiters(t, b, key, 0, 3, 3, 7, 0, 3)
	serveInOrder(t, b, key, holder, waiters, []int{3, 1, 2, 5, 0, 4})
}

// testPriorityTicket: a ticket with a priority goes before the waiters of
// a lower one that queued before it.
func testPriorityTicket(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	ctx := context.Background()
	holder := MustAcquire(t, b, key, req(time.Minute))
	waiters := queueWaiters(t, b, key, 0, 1)
	tk, err := b.OpenTicket(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "tester", Priority: 2})
	if err != nil || tk.Grant != nil {
		t.Fatalf("open ticket: got %+v, %v; want it queued", tk, err)
	}
	info, err := b.Inspect(ctx, key)
	if want := []int{2, 1, 0}; err != nil || !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("got queue priorities %v (%v), want %v", info.QueuePriorities, err, want)
	}
	if _, err := b.Release(ctx, key, holder.Token); err != nil {
		t.Fatal(err)
	}
	st, err := b.PollTicket(ctx, key, tk.ID, tk.Token, 10*time.Second)
	if err != nil || st.Grant == nil {
		t.Fatalf("poll: got %+v, %v; want the grant: the ticket ranks first", st, err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Waiters != 2 {
		t.Fatalf("after the ticket's grant: got %+v, %v; want both waiters still waiting", info, err)
	}
	serveInOrder(t, b, key, *st.Grant, waiters, []int{1, 0})
}

// testPriorityShared: a shared waiter of a higher priority goes before an
// exclusive one that queued first.
func testPriorityShared(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	ctx := context.Background()
	holder := MustAcquire(t, b, key, req(time.Minute))
	excl := queueWaiters(t, b, key, 0)[0]
	shared := AcquireAsync(t.Context(), b, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "tester", Mode: locks.Shared, Priority: 4})
	WaitUntilQueued(t, b, key, 2)
	if _, err := b.Release(ctx, key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := <-shared
	if res.Err != nil {
		t.Fatalf("shared waiter: %v", res.Err)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.Mode != locks.Shared || info.Waiters != 1 {
		t.Fatalf("got %+v, %v; want it held shared, the exclusive waiter still waiting", info, err)
	}
	if _, err := b.Release(ctx, key, res.Grant.Token); err != nil {
		t.Fatal(err)
	}
	if res := <-excl; res.Err != nil {
		t.Fatalf("exclusive waiter: %v", res.Err)
	}
}

// testPriorityPermit: a semaphore's waiters rank as a lock's: of two
// waiting for the one permit, the second, at a higher priority, gets it
// first.
func testPriorityPermit(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	ctx := context.Background()
	sem := func(p int, wait time.Duration) locks.SemaphoreRequest {
		return locks.SemaphoreRequest{Limit: 1, AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Wait: wait, Subject: "tester", Priority: p}}
	}
	holder, err := b.AcquirePermit(ctx, key, sem(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   locks.Grant
		err error
	}
	async := func(p int) <-chan result {
		out := make(chan result, 1)
		go func() {
			g, err := b.AcquirePermit(t.Context(), key, sem(p, 20*time.Second))
			out <- result{g, err}
		}()
		return out
	}
	low := async(0)
	waitForPermitWaiters(t, b, key, 1)
	high := async(7)
	waitForPermitWaiters(t, b, key, 2)
	if _, err := b.ReleasePermit(ctx, key, holder.Token); err != nil {
		t.Fatal(err)
	}
	h := <-high
	if h.err != nil {
		t.Fatalf("the priority-7 waiter: %v", h.err)
	}
	select {
	case l := <-low:
		t.Fatalf("the priority-0 waiter got %+v, %v while the priority-7 one holds the only permit", l.g, l.err)
	default:
	}
	if _, err := b.ReleasePermit(ctx, key, h.g.Token); err != nil {
		t.Fatal(err)
	}
	if l := <-low; l.err != nil {
		t.Fatalf("the priority-0 waiter: %v", l.err)
	}
}

// waitForPermitWaiters polls until n callers wait for a permit of key's
// semaphore.
func waitForPermitWaiters(t testing.TB, b locks.Semaphores, key locks.Key, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := b.InspectSemaphore(context.Background(), key)
		if err == nil && info.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %+v, %v; want %d waiters", info, err, n)
		}
		time.Sleep(5 * time.Millisecond) // polling for a waiter to queue
	}
}

// testPriorityPermitQueue: a semaphore's InspectSemaphore shows its
// queue's priorities in serving order, as a lock's Inspect does, and none
// when nobody waits.
func testPriorityPermitQueue(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	ctx := context.Background()
	sem := func(p int, wait time.Duration) locks.SemaphoreRequest {
		return locks.SemaphoreRequest{Limit: 1, AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Wait: wait, Subject: "tester", Priority: p}}
	}
	if _, err := b.AcquirePermit(ctx, key, sem(0, 0)); err != nil {
		t.Fatal(err)
	}
	info, err := b.InspectSemaphore(ctx, key)
	if err != nil || info.QueuePriorities != nil {
		t.Fatalf("nobody waits: got queue priorities %v (%v), want none", info.QueuePriorities, err)
	}
	waiting, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	prios := []int{0, 3, 0, 5, 3}
	for i, p := range prios {
		go func() {
			defer func() { done <- struct{}{} }()
			b.AcquirePermit(waiting, key, sem(p, time.Minute))
		}()
		waitForPermitWaiters(t, b, key, i+1)
	}
	info, err = b.InspectSemaphore(ctx, key)
	if want := []int{5, 3, 3, 0, 0}; err != nil || !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("got queue priorities %v (%v), want %v", info.QueuePriorities, err, want)
	}
	cancel()
	for range prios {
		<-done
	}
}

// testPriorityInvalid: a priority out of 0..9 is refused with
// ErrInvalidPriority (which is an ErrInvalid), for a lock, a ticket or a
// permit, and nothing is queued.
func testPriorityInvalid(t *testing.T, b locks.Backend, key locks.Key, _ time.Duration) {
	ctx := context.Background()
	for _, p := range []int{-1, 10, 1000} {
		_, err := b.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Second, Priority: p})
		if !errors.Is(err, locks.ErrInvalidPriority) || !errors.Is(err, locks.ErrInvalid) {
			t.Fatalf("acquire with priority %d: got %v, want ErrInvalidPriority", p, err)
		}
		if _, err := b.OpenTicket(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Second, Priority: p}); !errors.Is(err, locks.ErrInvalidPriority) {
			t.Fatalf("ticket with priority %d: got %v, want ErrInvalidPriority", p, err)
		}
	}
	_, err := b.AcquirePermit(ctx, key, locks.SemaphoreRequest{Limit: 2, AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Wait: time.Second, Priority: 10}})
	if !errors.Is(err, locks.ErrInvalidPriority) {
		t.Fatalf("permit with priority 10: got %v, want ErrInvalidPriority", err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("got %v, want the lock untouched", err)
	}
}

// testPriorityAging is #39's acceptance for aging: a priority-0 waiter
// behind a stream of priority-5 waiters, with an aging of a second, is
// served before every one of them that arrived more than five agings after
// it, and the stream goes first until then. The stream is count-based: each
// round queues one more priority-5 waiter and hands the lock on once (the
// holder works about 50 ms, a pace, not synchronisation), so the queue
// never empties; what is checked is the order against the arrival times
// the test saw, whatever the machine's speed.
func testPriorityAging(t *testing.T, b locks.Backend, key locks.Key, aging time.Duration) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type waiter struct {
		res        <-chan Result
		sent, seen time.Time // before its acquire was sent, and once it was seen queued
	}
	const slack = 50 * time.Millisecond // between the clock of the backend and the test's
	queued := 0
	queue := func(owner string, p int) *waiter {
		w := &waiter{sent: time.Now()}
		w.res = AcquireAsync(ctx, b, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "tester", Owner: owner, Priority: p})
		queued++
		WaitUntilQueued(t, b, key, queued)
		w.seen = time.Now()
		return w
	}
	g := MustAcquire(t, b, key, req(time.Minute))
	low := queue("low", 0)
	stream := map[string]*waiter{}
	for i := range 3 {
		stream[fmt.Sprintf("p5-%d", i)] = queue(fmt.Sprintf("p5-%d", i), 5)
	}
	const rounds = 1000
	for round := 3; ; round++ {
		if round == rounds {
			t.Fatalf("%d hand-offs, and the priority-0 waiter is not served", rounds)
		}
		name := fmt.Sprintf("p5-%d", round)
		stream[name] = queue(name, 5)
		time.Sleep(50 * time.Millisecond) // the holder's work: the stream's pace
		if _, err := b.Release(context.Background(), key, g.Token); err != nil {
			t.Fatal(err)
		}
		queued--
		info := waitForInfo(t, b, key, "the next waiter to hold the lock", func(info locks.Info, err error) bool {
			return err == nil && info.Owner != ""
		})
		if info.Owner == "low" {
			res := <-low.res
			if res.Err != nil {
				t.Fatalf("the priority-0 waiter: %v", res.Err)
			}
			if round == 3 {
				t.Fatalf("the priority-0 waiter went before the priority-5 waiters that came right after it")
			}
			t.Logf("the priority-0 waiter was served after %v, at hand-off %d", time.Since(low.sent), round-2)
			return
		}
		w := stream[info.Owner]
		if w == nil {
			t.Fatalf("held by %q, want a waiter", info.Owner)
		}
		delete(stream, info.Owner)
		res := <-w.res
		if res.Err != nil {
			t.Fatalf("%s: %v", info.Owner, res.Err)
		}
		if late := w.sent.Sub(low.seen); late > 5*aging+slack {
			t.Fatalf("%s, which arrived %v after the priority-0 waiter (more than 5 agings of %v), was served before it", info.Owner, late, aging)
		}
		g = res.Grant
	}
}
