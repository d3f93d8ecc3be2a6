package handlers

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// TestContentionSnapshot: a step shows the most callers waiting at once,
// a quiet step between changes carries the level on, ended waits count
// in the step they ended, and other namespaces are not shown.
func TestContentionSnapshot(t *testing.T) {
	var c contention
	key := locks.Key{Namespace: "ns", Name: "busy"}
	t0 := time.UnixMilli(bucketOf(time.Now()) * contentionStep.Milliseconds())
	at := func(step int) time.Time { return t0.Add(time.Duration(step) * contentionStep) }
	c.waitStarted("lock", key, at(0))
	c.waitStarted("lock", key, at(0))
	c.waitEnded("lock", key, at(0), 300*time.Millisecond)
	c.waitEnded("lock", key, at(3), 2*time.Second) // steps 1, 2: one waits
	c.waitStarted("lock", locks.Key{Namespace: "other", Name: "x"}, at(3))

	snap := c.snapshot("ns", at(4))
	if len(snap.Series) != 1 || snap.Series[0].Name != "busy" || snap.Series[0].Waiting != 0 {
		t.Fatalf("series: got %+v, want busy alone, none waiting", snap.Series)
	}
	pts := snap.Series[0].Points
	if len(pts) != contentionBuckets {
		t.Fatalf("got %d points, want %d", len(pts), contentionBuckets)
	}
	last := pts[len(pts)-5:] // steps 0 to 4
	for i, want := range []ContentionPoint{
		{Waiters: 2, Waits: 1, WaitMsMax: 300, WaitMsAvg: 300},
		{Waiters: 1}, {Waiters: 1},
		{Waiters: 1, Waits: 1, WaitMsMax: 2000, WaitMsAvg: 2000},
		{Waiters: 0},
	} {
		want.At = at(i).UnixMilli()
		if last[i] != want {
			t.Errorf("step %d: got %+v, want %+v", i, last[i], want)
		}
	}
	if pts[0].Waiters != 0 {
		t.Errorf("before the first wait: got %+v, want no waiters", pts[0])
	}
}
