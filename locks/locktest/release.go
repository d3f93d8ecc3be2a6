package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// releaseHold ends hold of token's grant of key, and returns what the
// release did.
func releaseHold(t testing.TB, l locks.Locker, key locks.Key, token, hold string) locks.Released {
	t.Helper()
	rel, err := l.ReleaseHold(context.Background(), key, token, hold)
	if err != nil {
		t.Fatalf("release hold %q: %v", hold, err)
	}
	return rel
}

// releasePermit gives back token's permit of key, and returns what the
// release did.
func releasePermit(t testing.TB, s locks.Semaphores, key locks.Key, token string) locks.Released {
	t.Helper()
	rel, err := s.ReleasePermit(context.Background(), key, token)
	if err != nil {
		t.Fatalf("release permit: %v", err)
	}
	return rel
}

// minHeld is how long the release tests hold a grant before they end it:
// long enough for a backend's millisecond clock to tell it from nothing.
const minHeld = 20 * time.Millisecond

// wantEnded checks that rel ended a grant taken after start and held for
// at least minHeld. The backend's clock is not the test's: Held may be
// off by a clock step, hence the slack above.
func wantEnded(t testing.TB, what string, rel locks.Released, start time.Time) {
	t.Helper()
	most := time.Since(start) + time.Second
	if rel.Holds != 0 || !rel.Ended || rel.Held < minHeld || rel.Held > most {
		t.Fatalf("%s: got %+v; want 0 holds, the grant ended, held in [%v, %v]", what, rel, minHeld, most)
	}
}

// wantNothingEnded checks that a release left holds holds and ended
// nothing.
func wantNothingEnded(t testing.TB, what string, rel locks.Released, holds int) {
	t.Helper()
	if rel != (locks.Released{Holds: holds}) {
		t.Fatalf("%s: got %+v; want %d holds left, nothing ended", what, rel, holds)
	}
}

// testReleaseSaysWhatItEnded: a release says how many holds are left. The
// one that ends the grant, its last hold, says so and how long the grant
// was held; a repeated release ended nothing.
func testReleaseSaysWhatItEnded(t *testing.T, l locks.Locker, key locks.Key) {
	start := time.Now()
	g := MustAcquire(t, l, key, req(time.Minute))
	inner, err := l.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(minHeld)
	wantNothingEnded(t, "the base hold's release", releaseHold(t, l, key, g.Token, ""), 1)
	wantNothingEnded(t, "the base hold's release again", releaseHold(t, l, key, g.Token, ""), 1)
	wantEnded(t, "the last hold's release", releaseHold(t, l, key, g.Token, inner.Hold), start)
	wantNothingEnded(t, "the last hold's release again", releaseHold(t, l, key, g.Token, inner.Hold), 0)
	wantNothingEnded(t, "the base hold's release after the grant ended", releaseHold(t, l, key, g.Token, ""), 0)
}

// testSharedReleaseSaysWhatItEnded: a shared holder's release ends its own
// grant, though others still hold the lock.
func testSharedReleaseSaysWhatItEnded(t *testing.T, l locks.Locker, key locks.Key) {
	start := time.Now()
	a := MustAcquire(t, l, key, sharedReq(time.Minute))
	b := MustAcquire(t, l, key, sharedReq(time.Minute))
	time.Sleep(minHeld)
	wantEnded(t, "a shared holder's release", releaseHold(t, l, key, a.Token, ""), start)
	wantNothingEnded(t, "a shared holder's release again", releaseHold(t, l, key, a.Token, ""), 0)
	wantEnded(t, "the last shared holder's release", releaseHold(t, l, key, b.Token, ""), start)
}

// testPermitReleaseSaysWhatItEnded: a permit's release says how long the
// permit was held; a repeated release ended nothing.
func testPermitReleaseSaysWhatItEnded(t *testing.T, b locks.Backend, key locks.Key) {
	start := time.Now()
	g := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	other := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	time.Sleep(minHeld)
	wantEnded(t, "release", releasePermit(t, b, key, g.Token), start)
	wantNothingEnded(t, "a repeated release", releasePermit(t, b, key, g.Token), 0)
	wantEnded(t, "the other permit's release", releasePermit(t, b, key, other.Token), start)
}
