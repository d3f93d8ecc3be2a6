package loadgen

import (
	"slices"
	"testing"
	"time"
)

// Synthetic attempts, times in milliseconds on the run's clock.

// got is a granted acquire whose release succeeded.
func got(start, end float64, fence int64, relStart, relEnd float64) attempt {
	return attempt{start: at(start), end: at(end), granted: true, fence: fence,
		released: true, relStart: at(relStart), relEnd: at(relEnd)}
}

// lost is a granted acquire whose release failed (the lease ran out).
func lost(start, end float64, fence int64) attempt {
	return attempt{start: at(start), end: at(end), granted: true, fence: fence}
}

// missed is an acquire that was not granted (its wait ran out).
func missed(start, end float64) attempt { return attempt{start: at(start), end: at(end)} }

func at(msec float64) int64 { return int64(msec * float64(time.Millisecond)) }

func TestAnalyzeContention(t *testing.T) {
	tests := map[string]struct {
		perWorker    [][]attempt
		elapsed      time.Duration
		want         Fairness
		wantHandoffs []float64 // ms, in grant order
	}{
		"round robin, as FIFO would do it": {
			// Grants in fence order: w0 (1), w1 (2), w2 (3), w0 (4). Each
			// release happens while the next in line is already waiting.
			perWorker: [][]attempt{
				{got(0, 10, 1, 10, 12), got(13, 40, 4, 40, 42)},
				{got(1, 20, 2, 20, 22), missed(23, 50)},
				{got(2, 30, 3, 30, 32), missed(33, 50)},
			},
			elapsed: 50 * time.Millisecond,
			want: Fairness{
				Grants: 4, ContestedReleases: 3, SelfRegrants: 0,
				LongestWaitMS: 28, P99WaitMS: 28, CycleMS: 12.5, FIFOBoundMS: 25,
				LongestOverFIFO: 28.0 / 25, P99OverFIFO: 28.0 / 25,
				MinGrants: 1, MaxGrants: 2,
			},
			wantHandoffs: []float64{8, 8, 8},
		},
		"the releaser grabs it again while another waits": {
			// w1 waits from 0 to 10; w0 releases at 1-2 and is granted
			// again at 4 (unfair), then releases at 4-5 and w1 gets it.
			perWorker: [][]attempt{
				{got(0, 1, 1, 1, 2), got(3, 4, 2, 4, 5)},
				{got(0, 10, 3, 10, 11)},
			},
			elapsed: 20 * time.Millisecond,
			want: Fairness{
				Grants: 3, ContestedReleases: 2, SelfRegrants: 1, SelfRegrantShare: 0.5, SelfRegrantLeadMS: 1,
				LongestWaitMS: 10, P99WaitMS: 10, CycleMS: 20.0 / 3, FIFOBoundMS: 20.0 / 3,
				LongestOverFIFO: 1.5, P99OverFIFO: 1.5,
				MinGrants: 1, MaxGrants: 2,
			},
			wantHandoffs: []float64{2, 5},
		},
		"the lead of a self-regrant is the longest any pending acquire had": {
			// w0 releases at 10 (w1 pending since 9.5, w2 since 9) and again
			// at 12 (w1 and w2 still pending): two self-regrants, leads 1
			// and 3 ms. A FIFO server can do this only while the acquires of
			// w1 and w2 are still on their way to it; then they are served.
			perWorker: [][]attempt{
				{got(0, 1, 1, 10, 11), got(11, 11.5, 2, 12, 12.5), got(12.5, 13, 3, 13, 14)},
				{got(9.5, 15, 4, 15, 16)},
				{got(9, 17, 5, 17, 18)},
			},
			elapsed: 20 * time.Millisecond,
			want: Fairness{
				Grants: 5, ContestedReleases: 4, SelfRegrants: 2, SelfRegrantShare: 0.5, SelfRegrantLeadMS: 3,
				LongestWaitMS: 8, P99WaitMS: 8, CycleMS: 4, FIFOBoundMS: 8,
				LongestOverFIFO: 1, P99OverFIFO: 1,
				MinGrants: 1, MaxGrants: 3,
			},
			wantHandoffs: []float64{0.5, 0.5, 1, 1},
		},
		"re-acquiring a lock nobody waits for is not unfair": {
			// w1 asks at 2, after w0's release was sent at 1: at that
			// release nobody was waiting, so w0's next grant is fair. At
			// w0's second release (4-5) w1 waits, and gets the lock.
			perWorker: [][]attempt{
				{got(0, 1, 1, 1, 2), got(3, 4, 2, 4, 5)},
				{got(2, 10, 3, 10, 11)},
			},
			elapsed: 20 * time.Millisecond,
			want: Fairness{
				Grants: 3, ContestedReleases: 1, SelfRegrants: 0,
				LongestWaitMS: 8, P99WaitMS: 8, CycleMS: 20.0 / 3, FIFOBoundMS: 20.0 / 3,
				LongestOverFIFO: 1.2, P99OverFIFO: 1.2,
				MinGrants: 1, MaxGrants: 2,
			},
			wantHandoffs: []float64{2, 5},
		},
		"a waiter that arrives during the release does not count": {
			// w1 sends its acquire at 1.5, after w0 sent its release (at 1):
			// the server may have run the release first.
			perWorker: [][]attempt{
				{got(0, 1, 1, 1, 2), got(3, 4, 2, 4, 5)},
				{missed(1.5, 3.5)},
			},
			elapsed: 10 * time.Millisecond,
			want: Fairness{
				Grants: 2, ContestedReleases: 0, SelfRegrants: 0,
				LongestWaitMS: 2, P99WaitMS: 2, CycleMS: 5, FIFOBoundMS: 5,
				LongestOverFIFO: 0.4, P99OverFIFO: 0.4,
				MinGrants: 0, MaxGrants: 2,
			},
			wantHandoffs: []float64{2},
		},
		"grants are ordered by fencing token, not by worker": {
			// w1 holds first (fence 7), w0 second (fence 8), waiting since 0;
			// the grant answer of w0 (at 5) arrived before w1 heard back
			// from its release (at 6): a handoff of 0, not a negative one.
			perWorker: [][]attempt{
				{got(0, 5, 8, 5, 6)},
				{got(0, 1, 7, 4, 6)},
			},
			elapsed: 10 * time.Millisecond,
			want: Fairness{
				Grants: 2, ContestedReleases: 1, SelfRegrants: 0, EarlyHandoffs: 1,
				LongestWaitMS: 5, P99WaitMS: 5, CycleMS: 5, FIFOBoundMS: 5,
				LongestOverFIFO: 1, P99OverFIFO: 1,
				MinGrants: 1, MaxGrants: 1,
			},
			wantHandoffs: []float64{0},
		},
		"no handoff from a grant whose release failed": {
			// w0's lease ran out (release failed), so w1's grant was not
			// handed off by a release.
			perWorker: [][]attempt{
				{lost(0, 1, 1)},
				{got(0, 50, 2, 50, 51)},
			},
			elapsed: 60 * time.Millisecond,
			want: Fairness{
				Grants: 2, ContestedReleases: 0, SelfRegrants: 0,
				LongestWaitMS: 50, P99WaitMS: 50, CycleMS: 30, FIFOBoundMS: 30,
				LongestOverFIFO: 50.0 / 30, P99OverFIFO: 50.0 / 30,
				MinGrants: 1, MaxGrants: 1,
			},
			wantHandoffs: []float64{},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f, handoffs := analyzeContention(tt.perWorker, tt.elapsed)
			if !fairnessEqual(f, tt.want) {
				t.Errorf("fairness\n got %+v\nwant %+v", f, tt.want)
			}
			gotMS := make([]float64, len(handoffs))
			for i, h := range handoffs {
				gotMS[i] = ms(h)
			}
			if !slices.Equal(gotMS, tt.wantHandoffs) {
				t.Errorf("handoffs = %v ms, want %v ms", gotMS, tt.wantHandoffs)
			}
		})
	}
}

// fairnessEqual compares with a tolerance on the derived ratios, which are
// computed in floating point.
func fairnessEqual(a, b Fairness) bool {
	near := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	return a.Grants == b.Grants && a.ContestedReleases == b.ContestedReleases &&
		a.SelfRegrants == b.SelfRegrants && near(a.SelfRegrantLeadMS, b.SelfRegrantLeadMS) && a.EarlyHandoffs == b.EarlyHandoffs && near(a.SelfRegrantShare, b.SelfRegrantShare) &&
		near(a.LongestWaitMS, b.LongestWaitMS) && near(a.CycleMS, b.CycleMS) &&
		near(a.FIFOBoundMS, b.FIFOBoundMS) && near(a.LongestOverFIFO, b.LongestOverFIFO) &&
		near(a.P99WaitMS, b.P99WaitMS) && near(a.P99OverFIFO, b.P99OverFIFO) &&
		a.MinGrants == b.MinGrants && a.MaxGrants == b.MaxGrants
}

func TestMixedStats(t *testing.T) {
	shared := func(start, end, rel int64) attempt {
		return attempt{start: start, end: end, granted: true, released: true, relStart: rel, shared: true}
	}
	exclusive := func(start, end, rel int64) attempt {
		a := shared(start, end, rel)
		a.shared = false
		return a
	}
	for name, tc := range map[string]struct {
		perWorker     [][]attempt
		wantMost      int
		wantConflicts int64
	}{
		"readers together, then a writer": {
			perWorker: [][]attempt{
				{shared(0, 10, 20), exclusive(15, 20, 30)},
				{shared(0, 12, 18), shared(25, 30, 40)},
				{shared(5, 11, 19)},
			},
			wantMost: 3,
		},
		"a writer beside a reader": {
			perWorker:     [][]attempt{{shared(0, 10, 20)}, {exclusive(0, 15, 25)}},
			wantMost:      2,
			wantConflicts: 1,
		},
		"two writers at once": {
			perWorker:     [][]attempt{{exclusive(0, 10, 20)}, {exclusive(0, 19, 25)}},
			wantMost:      2,
			wantConflicts: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := mixedStats(tc.perWorker, 0.8)
			if m.MostHolders != tc.wantMost || m.Conflicts != tc.wantConflicts {
				t.Errorf("most holders %d, conflicts %d; want %d, %d", m.MostHolders, m.Conflicts, tc.wantMost, tc.wantConflicts)
			}
			var grants int64
			for _, as := range tc.perWorker {
				grants += int64(len(as))
			}
			if m.SharedGrants+m.ExclusiveGrants != grants || int64(m.SharedWait.N) != m.SharedGrants || int64(m.ExclusiveWait.N) != m.ExclusiveGrants {
				t.Errorf("grants %d shared + %d exclusive, waits %d + %d; want %d in all, a wait each", m.SharedGrants, m.ExclusiveGrants,
					m.SharedWait.N, m.ExclusiveWait.N, grants)
			}
		})
	}
}
