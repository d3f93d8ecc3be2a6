package locktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// The shared (read) lock cases of Run.
var sharedCases = []struct {
	name string
	test func(t *testing.T, l locks.Locker, key locks.Key)
}{
	{"SharedHoldersCoexist", testSharedCoexist},
	{"ExclusiveHolderExcludesShared", testExclusiveExcludesShared},
	{"SharedRequestBehindWaitingExclusiveWaits", testSharedBehindExclusive},
	{"StreamOfSharedRequestsDoesNotStarveExclusive", testNoWriterStarvation},
	{"SharedWaitersAtTheHeadAreGrantedTogether", testSharedGrantedTogether},
	{"SharedLeasesAreTheirOwn", testSharedLeases},
	{"SharedReentryKeepsItsMode", testSharedReentry},
	{"ExclusiveWaiterLeavingLetsSharedOnesIn", testExclusiveLeavesSharedIn},
	{"LastSharedReleaseHandsToExclusive", testLastSharedHandsOn},
	{"InspectShowsAtMostMaxHoldersShown", testInspectShowsAtMostMax},
}

func sharedReq(ttl time.Duration) locks.AcquireRequest {
	return locks.AcquireRequest{TTL: ttl, Subject: "reader", Mode: locks.Shared}
}

// queueAs starts a waiter with request r and waits until it is the n-th
// in the queue.
func queueAs(t testing.TB, l locks.Locker, key locks.Key, r locks.AcquireRequest, n int) <-chan Result {
	t.Helper()
	if r.Wait == 0 {
		r.Wait = 30 * time.Second
	}
	w := AcquireAsync(context.Background(), l, key, r)
	WaitUntilQueued(t, l, key, n)
	return w
}

// granted receives a waiter's result and fails unless it is a grant.
func granted(t testing.TB, what string, w <-chan Result) locks.Grant {
	t.Helper()
	select {
	case res := <-w:
		if res.Err != nil {
			t.Fatalf("%s: %v", what, res.Err)
		}
		return res.Grant
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no grant within 15s", what)
	}
	return locks.Grant{}
}

// stillWaiting fails if a waiter has an answer already.
func stillWaiting(t testing.TB, what string, w <-chan Result) {
	t.Helper()
	select {
	case res := <-w:
		t.Fatalf("%s: got %+v, %v; want it still waiting", what, res.Grant, res.Err)
	default:
	}
}

func mustRelease(t testing.TB, l locks.Locker, key locks.Key, g locks.Grant) {
	t.Helper()
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func testSharedCoexist(t *testing.T, l locks.Locker, key locks.Key) {
	a := MustAcquire(t, l, key, sharedReq(time.Minute))
	b := MustAcquire(t, l, key, sharedReq(2*time.Minute))
	if a.Token == b.Token || b.FencingToken <= a.FencingToken || a.Holds != 1 || b.Holds != 1 {
		t.Fatalf("got %+v and %+v; want two grants with their own tokens and increasing fences", a, b)
	}
	_, err := l.Acquire(context.Background(), key, req(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) || held.RetryAfter < time.Minute {
		t.Fatalf("exclusive acquire beside two shared holders: got %v; want held until the longer lease ends", err)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.Mode != locks.Shared || len(info.Holders) != 2 ||
		info.Holders[0].FencingToken != a.FencingToken || info.Holders[1].FencingToken != b.FencingToken ||
		info.FencingToken != b.FencingToken || info.TTL < time.Minute || info.Subject != "reader" {
		t.Fatalf("inspect: got %+v, %v; want shared, two holders soonest first, described by the later one", info, err)
	}
	mustRelease(t, l, key, a)
	if info, err := l.Inspect(context.Background(), key); err != nil || len(info.Holders) != 1 {
		t.Fatalf("after one release: got %+v, %v; want one holder left", info, err)
	}
	mustRelease(t, l, key, b)
	if _, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("after both releases: got %v, want not held", err)
	}
	x := MustAcquire(t, l, key, req(time.Minute))
	if x.FencingToken <= b.FencingToken {
		t.Fatalf("exclusive grant after shared ones: fence %d, want above %d", x.FencingToken, b.FencingToken)
	}
	mustRelease(t, l, key, x)
}

func testExclusiveExcludesShared(t *testing.T, l locks.Locker, key locks.Key) {
	x := MustAcquire(t, l, key, req(time.Minute))
	_, err := l.Acquire(context.Background(), key, sharedReq(time.Minute))
	wantErr(t, err, locks.ErrHeld)
	if info, err := l.Inspect(context.Background(), key); err != nil || info.Mode != locks.Exclusive || len(info.Holders) != 1 {
		t.Fatalf("inspect: got %+v, %v; want one exclusive holder", info, err)
	}
	mustRelease(t, l, key, x)
}

func testSharedBehindExclusive(t *testing.T, l locks.Locker, key locks.Key) {
	s1 := MustAcquire(t, l, key, sharedReq(time.Minute))
	x := queueAs(t, l, key, req(time.Minute), 1)
	_, err := l.Acquire(context.Background(), key, sharedReq(time.Minute))
	wantErr(t, err, locks.ErrHeld) // it does not jump the queue
	s2 := queueAs(t, l, key, sharedReq(time.Minute), 2)
	mustRelease(t, l, key, s1)
	xg := granted(t, "the exclusive waiter", x)
	stillWaiting(t, "the shared waiter behind the exclusive one", s2)
	mustRelease(t, l, key, xg)
	mustRelease(t, l, key, granted(t, "the shared waiter", s2))
}

func testSharedGrantedTogether(t *testing.T, l locks.Locker, key locks.Key) {
	x := MustAcquire(t, l, key, req(time.Minute))
	s1 := queueAs(t, l, key, sharedReq(time.Minute), 1)
	s2 := queueAs(t, l, key, sharedReq(time.Minute), 2)
	x2 := queueAs(t, l, key, req(time.Minute), 3)
	s3 := queueAs(t, l, key, sharedReq(time.Minute), 4)
	mustRelease(t, l, key, x)
	g1, g2 := granted(t, "shared waiter 1", s1), granted(t, "shared waiter 2", s2)
	if g1.FencingToken <= x.FencingToken || g2.FencingToken <= g1.FencingToken {
		t.Fatalf("fences %d, %d after %d: want increasing", g1.FencingToken, g2.FencingToken, x.FencingToken)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.Mode != locks.Shared || len(info.Holders) != 2 || info.Waiters != 2 {
		t.Fatalf("inspect: got %+v, %v; want two shared holders and two waiters", info, err)
	}
	stillWaiting(t, "the exclusive waiter", x2)
	stillWaiting(t, "the shared waiter behind it", s3)
	mustRelease(t, l, key, g1)
	stillWaiting(t, "the exclusive waiter, one shared holder left", x2)
	mustRelease(t, l, key, g2)
	xg := granted(t, "the exclusive waiter", x2)
	stillWaiting(t, "the last shared waiter", s3)
	mustRelease(t, l, key, xg)
	mustRelease(t, l, key, granted(t, "the last shared waiter", s3))
}

func testSharedLeases(t *testing.T, l locks.Locker, key locks.Key) {
	short := MustAcquire(t, l, key, sharedReq(200*time.Millisecond))
	long := MustAcquire(t, l, key, sharedReq(time.Minute))
	if info := waitUntilHolders(t, l, key, 1); info.FencingToken != long.FencingToken {
		t.Fatalf("got %+v; want the long lease left", info)
	}
	_, err := l.Renew(context.Background(), key, short.Token, time.Minute)
	wantErr(t, err, locks.ErrNotHolder)
	lease, err := l.Renew(context.Background(), key, long.Token, 2*time.Minute)
	if err != nil || lease.FencingToken != long.FencingToken || lease.TTL != 2*time.Minute || lease.Mode != locks.Shared {
		t.Fatalf("renew: got %+v, %v; want its own fence, a 2m lease, shared", lease, err)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.TTL < 110*time.Second {
		t.Fatalf("inspect after renew: got %+v, %v; want about 2m left", info, err)
	}
	mustRelease(t, l, key, long)
}

func testSharedReentry(t *testing.T, l locks.Locker, key locks.Key) {
	s := MustAcquire(t, l, key, sharedReq(time.Minute))
	r, err := l.Reenter(context.Background(), key, s.Token, time.Second, locks.Shared)
	if err != nil || r.Holds != 2 || r.FencingToken != s.FencingToken || r.TTL < 50*time.Second {
		t.Fatalf("shared re-entry: got %+v, %v; want 2 holds, the same fence, the lease kept", r, err)
	}
	_, err = l.Reenter(context.Background(), key, s.Token, time.Minute, locks.Exclusive)
	wantErr(t, err, locks.ErrHeld) // no upgrade
	if info, err := l.Inspect(context.Background(), key); err != nil || info.Holds != 2 || info.Mode != locks.Shared {
		t.Fatalf("after a refused upgrade: got %+v, %v; want the shared holder's 2 holds", info, err)
	}
	if rel, err := l.Release(context.Background(), key, s.Token); err != nil || rel.Holds != 1 {
		t.Fatalf("release: got %+v, %v; want 1 hold left", rel, err)
	}
	if rel, err := l.ReleaseHold(context.Background(), key, s.Token, r.Hold); err != nil || rel.Holds != 0 {
		t.Fatalf("release: got %+v, %v; want 0", rel, err)
	}
	x := MustAcquire(t, l, key, req(time.Minute))
	_, err = l.Reenter(context.Background(), key, x.Token, time.Minute, locks.Shared)
	wantErr(t, err, locks.ErrHeld) // no downgrade either
	mustRelease(t, l, key, x)
}

func testExclusiveLeavesSharedIn(t *testing.T, l locks.Locker, key locks.Key) {
	s1 := MustAcquire(t, l, key, sharedReq(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	x := AcquireAsync(ctx, l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second})
	WaitUntilQueued(t, l, key, 1)
	s2 := queueAs(t, l, key, sharedReq(time.Minute), 2)
	cancel() // the exclusive waiter goes away
	if res := <-x; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("cancelled exclusive waiter: got %+v, %v", res.Grant, res.Err)
	}
	g2 := granted(t, "the shared waiter, once nothing blocks it", s2)
	mustRelease(t, l, key, s1)
	mustRelease(t, l, key, g2)
}

func testLastSharedHandsOn(t *testing.T, l locks.Locker, key locks.Key) {
	s1 := MustAcquire(t, l, key, sharedReq(time.Minute))
	s2 := MustAcquire(t, l, key, sharedReq(300*time.Millisecond)) // its lease ends: nobody releases it
	x := queueAs(t, l, key, req(time.Minute), 1)
	mustRelease(t, l, key, s1)
	stillWaiting(t, "the exclusive waiter while a shared lease lasts", x)
	xg := granted(t, "the exclusive waiter after the last shared lease ended", x)
	if xg.FencingToken <= s2.FencingToken {
		t.Fatalf("fence %d, want above %d", xg.FencingToken, s2.FencingToken)
	}
	mustRelease(t, l, key, xg)
}

func testNoWriterStarvation(t *testing.T, l locks.Locker, key locks.Key) {
	first := MustAcquire(t, l, key, sharedReq(time.Minute))
	x := queueAs(t, l, key, req(time.Minute), 1)
	var readers []<-chan Result
	for i := range 5 { // readers keep coming, some waiting, some not
		_, err := l.Acquire(context.Background(), key, sharedReq(time.Minute))
		wantErr(t, err, locks.ErrHeld)
		readers = append(readers, queueAs(t, l, key, sharedReq(time.Minute), 2+i))
	}
	mustRelease(t, l, key, first)
	xg := granted(t, "the exclusive waiter", x)
	for i, r := range readers {
		stillWaiting(t, fmt.Sprintf("reader %d, while the writer holds", i), r)
	}
	mustRelease(t, l, key, xg)
	for i, r := range readers { // then all of them together
		g := granted(t, fmt.Sprintf("reader %d", i), r)
		defer mustRelease(t, l, key, g)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || len(info.Holders) != len(readers) {
		t.Fatalf("inspect: got %+v, %v; want %d shared holders at once", info, err, len(readers))
	}
}
