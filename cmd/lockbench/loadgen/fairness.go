package loadgen

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"
)

// attempt is one acquire call of a contended worker and, when it was
// granted, the release that followed. Times are nanoseconds since the run
// started, on one monotonic clock shared by every worker of the process.
type attempt struct {
	start, end int64 // acquire sent, acquire answered
	granted    bool
	fence      int64 // the grant's fencing token: the order of grants
	released   bool  // the release answered with success
	relStart   int64 // release sent
	relEnd     int64 // release answered
	shared     bool  // mixed mode: a shared acquire
}

// Fairness describes who got a contended lock, and after how long.
type Fairness struct {
	// Grants is how many acquires were granted.
	Grants int64 `json:"grants"`
	// ContestedReleases counts releases sent while another worker had an
	// acquire pending (sent before the release was sent, answered after).
	// Pending is as the client sees it: sent, not necessarily arrived.
	ContestedReleases int64 `json:"contested_releases"`
	// SelfRegrants counts contested releases whose next grant went back to
	// the worker that had just released. A FIFO server does that only when
	// no other acquire has reached it: the pending ones may still be on
	// their way (in the kernel, in a scheduler's queue), and the releaser's
	// next acquire can overtake them. SelfRegrantLeadMS tells the two
	// apart.
	SelfRegrants int64 `json:"self_regrants"`
	// SelfRegrantLeadMS is, over the self-regrants, the longest that
	// another worker's acquire had been pending when the release was sent:
	// the most time it had to reach the server before the release did. A
	// lead of about a round trip (a millisecond or two on loopback) is an
	// acquire still on its way; a long one is a request stalled on its way
	// or a queue that let the releaser jump it, which only the server can
	// tell apart.
	SelfRegrantLeadMS float64 `json:"self_regrant_lead_ms"`
	// SelfRegrantShare is SelfRegrants / ContestedReleases: 0 under strict
	// FIFO, near 1 when releasers win the race to re-acquire.
	SelfRegrantShare float64 `json:"self_regrant_share"`
	// EarlyHandoffs counts grants answered before the previous holder heard
	// back from its release: they count as handoffs of 0.
	EarlyHandoffs int64 `json:"early_handoffs"`
	// LongestWaitMS is the longest acquire, granted or not, and P99WaitMS
	// the 99th percentile: one stall of the machine moves the first, a
	// queue that lets some jump ahead moves both.
	LongestWaitMS float64 `json:"longest_wait_ms"`
	P99WaitMS     float64 `json:"p99_wait_ms"`
	// CycleMS is the mean time between two grants (hold plus overhead).
	CycleMS float64 `json:"cycle_ms"`
	// FIFOBoundMS is about the longest wait strict FIFO allows:
	// (workers-1) cycles, everybody else's turn once.
	FIFOBoundMS float64 `json:"fifo_bound_ms"`
	// LongestOverFIFO is LongestWaitMS / FIFOBoundMS, P99OverFIFO is
	// P99WaitMS / FIFOBoundMS.
	LongestOverFIFO float64 `json:"longest_over_fifo"`
	P99OverFIFO     float64 `json:"p99_over_fifo"`
	// MinGrants and MaxGrants are the fewest and most grants one worker got.
	MinGrants int64 `json:"min_grants_per_worker"`
	MaxGrants int64 `json:"max_grants_per_worker"`
}

// grantRef names one granted attempt: perWorker[worker][i].
type grantRef struct {
	worker, i int
	fence     int64
}

// analyzeContention orders the grants of a run on one lock by fencing token
// (grant order, whatever order the workers recorded them in) and returns the
// fairness figures and the handoff latencies: for each grant that followed
// a successful release, the time from that release's answer to the grant's
// answer, in nanoseconds. A grant answered before the previous release's
// answer arrived counts as a handoff of 0. perWorker[w] holds worker w's
// attempts in the order it made them; elapsed is the run's length.
func analyzeContention(perWorker [][]attempt, elapsed time.Duration) (Fairness, []int64) {
	var f Fairness
	var grants []grantRef
	var waits []int64
	for w, as := range perWorker {
		n := int64(0)
		for i, a := range as {
			waits = append(waits, a.end-a.start)
			if a.granted {
				n++
				grants = append(grants, grantRef{worker: w, i: i, fence: a.fence})
			}
		}
		if w == 0 || n < f.MinGrants {
			f.MinGrants = n
		}
		f.MaxGrants = max(f.MaxGrants, n)
	}
	slices.SortFunc(grants, func(a, b grantRef) int { return cmp.Compare(a.fence, b.fence) })
	f.Grants = int64(len(grants))

	handoffs := make([]int64, 0, len(grants))
	for k := 1; k < len(grants); k++ {
		prevRef, cur := grants[k-1], grants[k]
		prev := perWorker[prevRef.worker][prevRef.i]
		if !prev.released {
			continue // it expired or failed: no release to hand off from
		}
		got := perWorker[cur.worker][cur.i]
		if got.end < prev.relEnd {
			f.EarlyHandoffs++
		}
		handoffs = append(handoffs, max(got.end-prev.relEnd, 0))
		if since, ok := othersWaitingSince(perWorker, prevRef.worker, prev.relStart); ok {
			f.ContestedReleases++
			if cur.worker == prevRef.worker {
				f.SelfRegrants++
				f.SelfRegrantLeadMS = max(f.SelfRegrantLeadMS, ms(prev.relStart-since))
			}
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		f.LongestWaitMS = ms(waits[len(waits)-1])
		f.P99WaitMS = ms(percentile(waits, 0.99))
	}
	if f.ContestedReleases > 0 {
		f.SelfRegrantShare = float64(f.SelfRegrants) / float64(f.ContestedReleases)
	}
	if f.Grants > 0 && len(perWorker) > 1 {
		cycle := float64(elapsed) / float64(f.Grants)
		f.CycleMS = cycle / float64(time.Millisecond)
		f.FIFOBoundMS = f.CycleMS * float64(len(perWorker)-1)
		f.LongestOverFIFO = f.LongestWaitMS / f.FIFOBoundMS
		f.P99OverFIFO = f.P99WaitMS / f.FIFOBoundMS
	}
	return f, handoffs
}

// othersWaitingSince reports whether a worker other than holder had an
// acquire pending when the holder sent its release at relStart, and when
// the earliest of those pending was sent. A worker has at most one call in
// flight, so only its last attempt sent before relStart can be.
func othersWaitingSince(perWorker [][]attempt, holder int, relStart int64) (since int64, ok bool) {
	for w, as := range perWorker {
		if w == holder {
			continue
		}
		// The first attempt sent after relStart; the one before it is the
		// candidate.
		i := sort.Search(len(as), func(i int) bool { return as[i].start > relStart })
		if i > 0 && as[i-1].end > relStart && (!ok || as[i-1].start < since) {
			since, ok = as[i-1].start, true
		}
	}
	return since, ok
}

// SelfRegrantCell renders the self-regrants of f for a report's table:
// "2 of 16612 (0 %), lead ≤ 1.3 ms", the lead only when there are any.
func SelfRegrantCell(f *Fairness) string {
	cell := fmt.Sprintf("%d of %d (%.0f %%)", f.SelfRegrants, f.ContestedReleases, 100*f.SelfRegrantShare)
	if f.SelfRegrants > 0 {
		cell += fmt.Sprintf(", lead ≤ %s ms", Num(f.SelfRegrantLeadMS))
	}
	return cell
}
