package handlers

import (
	"fmt"
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

// TestServedSemaphores: every semaphore acquire is remembered by
// namespace, waiting or not, for the window and no longer; past the cap a
// new one is followed only once an old one has left the window.
func TestServedSemaphores(t *testing.T) {
	var c contention
	t0 := time.Now()
	c.semaphoreServed(locks.Key{Namespace: "ns", Name: "b"}, t0)
	c.semaphoreServed(locks.Key{Namespace: "ns", Name: "a"}, t0)
	c.semaphoreServed(locks.Key{Namespace: "ns", Name: "b"}, t0.Add(time.Minute))
	c.semaphoreServed(locks.Key{Namespace: "other", Name: "x"}, t0)

	got := c.snapshot("ns", t0.Add(time.Minute)).Semaphores
	want := []ServedSemaphore{{"a", t0.UnixMilli()}, {"b", t0.Add(time.Minute).UnixMilli()}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("served in ns: got %+v, want %+v", got, want)
	}
	if got := c.servedSemaphores("ns", t0.Add(contentionWindow+time.Second)); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("past a's window: got %+v, want b alone", got)
	}

	var full contention
	for i := range contentionKeys {
		full.semaphoreServed(locks.Key{Namespace: "ns", Name: fmt.Sprint("s", i)}, t0)
	}
	full.semaphoreServed(locks.Key{Namespace: "ns", Name: "late"}, t0.Add(time.Second))
	if n := len(full.servedSemaphores("ns", t0.Add(time.Second))); n != contentionKeys {
		t.Fatalf("past the cap: got %d followed, want %d (the new one not followed)", n, contentionKeys)
	}
	later := t0.Add(contentionWindow + time.Minute)
	full.semaphoreServed(locks.Key{Namespace: "ns", Name: "late"}, later)
	if got := full.servedSemaphores("ns", later); len(got) != 1 || got[0].Name != "late" || full.nSems != 1 {
		t.Fatalf("once the old ones left the window: got %d followed (%d counted), want late alone", len(got), full.nSems)
	}
}
