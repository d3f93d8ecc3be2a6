package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// testMinHoldWakesLaterWaiters: waiters that queue while a released
// grant's min hold keeps the lock (they came after the release, so no
// release is left to wake them) are served when it ends, by the backend,
// each within its one call: the first gets the lock no earlier than the
// end the backend stated (its own clock: Redis's, or the embedded
// backend's), and the next when the first releases it.
func testMinHoldWakesLaterWaiters(t *testing.T, l locks.Locker, key locks.Key) {
	const mh = 5 * time.Second // the waiters must queue inside it, on a busy machine too
	g, _ := acquireMinHold(t, l, key, mh)
	nh := releaseInsideMinHold(t, l, key, g)
	const n = 2
	results := make(chan Result, n)
	for range n {
		w := AcquireAsync(context.Background(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 60 * time.Second, Subject: "later"})
		go func() { results <- <-w }()
	}
	// Still inside the min hold once they are on their way: else they
	// did not wait for its end, and the case tests nothing.
	if _, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("inspect with the waiters on their way: got %v, want the lock still kept by its min hold (a machine slower than %v?)", err, mh)
	}
	served := 0
	var last int64
	for served < n {
		r := <-results
		if r.Err != nil {
			t.Fatalf("waiter %d: %v", served, r.Err)
		}
		info, err := l.Inspect(context.Background(), key)
		if err != nil || info.FencingToken != r.Grant.FencingToken {
			t.Fatalf("waiter %d got fence %d; inspect %+v, %v", served, r.Grant.FencingToken, info.Lease, err)
		}
		if served == 0 && info.AcquiredAt.Before(nh.FreeAt) {
			t.Fatalf("granted at %v, inside the min hold, which the backend said ends at %v", info.AcquiredAt, nh.FreeAt)
		}
		if r.Grant.FencingToken <= max(g.FencingToken, last) {
			t.Fatalf("waiter %d: fence %d after %d", served, r.Grant.FencingToken, max(g.FencingToken, last))
		}
		last = r.Grant.FencingToken
		if _, err := l.Release(context.Background(), key, r.Grant.Token); err != nil {
			t.Fatal(err)
		}
		served++
	}
}
