package loadgen

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// SharedAcquirer is a session that can also take its lock shared.
type SharedAcquirer interface {
	AcquireShared(wait time.Duration) (token string, fence int64, err error)
}

// MixedStats describes a shared/exclusive run, as the clients saw it: a
// grant held from its acquire's answer to its release being sent, which
// lies inside the time the server held it.
type MixedStats struct {
	SharedRatio     float64 `json:"shared_ratio"` // asked for
	SharedGrants    int64   `json:"shared_grants"`
	ExclusiveGrants int64   `json:"exclusive_grants"`
	// MostHolders is the most grants held at once.
	MostHolders int `json:"most_holders"`
	// Conflicts counts grants that began while a grant of the other kind,
	// or another exclusive one, was held: 0 unless the lock is broken.
	Conflicts int64 `json:"conflicts"`
	// SharedWait and ExclusiveWait are the acquires' latencies (their
	// server-side waits) by kind: an exclusive p99 far above the shared
	// one would be writers starving behind a stream of readers.
	SharedWait    Latency `json:"shared_wait"`
	ExclusiveWait Latency `json:"exclusive_wait"`
}

// mixedStats computes a mixed run's figures from its attempts.
func mixedStats(perWorker [][]attempt, ratio float64) *MixedStats {
	type edge struct {
		at     int64
		delta  int
		shared bool
	}
	st := &MixedStats{SharedRatio: ratio}
	var edges []edge
	var sharedWait, exclusiveWait []int64
	for _, as := range perWorker {
		for _, a := range as {
			if !a.granted {
				continue
			}
			if a.shared {
				st.SharedGrants++
				sharedWait = append(sharedWait, a.end-a.start)
			} else {
				st.ExclusiveGrants++
				exclusiveWait = append(exclusiveWait, a.end-a.start)
			}
			if a.released {
				edges = append(edges, edge{a.end, 1, a.shared}, edge{a.relStart, -1, a.shared})
			}
		}
	}
	// At equal times a release comes first: the interval is half-open.
	slices.SortFunc(edges, func(x, y edge) int {
		if x.at != y.at {
			return int(min(max(x.at-y.at, -1), 1))
		}
		return x.delta - y.delta
	})
	var shared, exclusive int
	for _, e := range edges {
		if e.delta > 0 && (exclusive > 0 || (!e.shared && shared > 0)) {
			st.Conflicts++
		}
		if e.shared {
			shared += e.delta
		} else {
			exclusive += e.delta
		}
		st.MostHolders = max(st.MostHolders, shared+exclusive)
	}
	st.SharedWait, st.ExclusiveWait = summarize(sharedWait), summarize(exclusiveWait)
	return st
}

// writeMixed adds the mixed runs' table to a report of scenarios.
func writeMixed(b *strings.Builder, r *Report) {
	if !slices.ContainsFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Gateway.Mixed != nil }) {
		return
	}
	WriteMixedHeader(b)
	for _, s := range r.Scenarios {
		for _, res := range []*Result{&s.Gateway, s.Floor} {
			if res != nil && res.Mixed != nil {
				WriteMixedRow(b, res.Path, s.Clients, res)
			}
		}
	}
}

func WriteMixedHeader(b *strings.Builder) {
	b.WriteString("\n### Shared and exclusive: every client on one lock\n\n")
	b.WriteString("Each acquire asks for a shared grant with the given probability, else an exclusive one, and waits " +
		"server-side. Holders as the clients saw them, from an acquire's answer to its release being sent; conflicts are " +
		"grants that began beside an exclusive one (0 unless the lock is broken). The exclusive wait's p99 against the " +
		"shared one shows whether writers starve behind readers.\n\n")
	b.WriteString("| target | clients | shared asked | cycles/s | grants shared / exclusive | most holders at once | conflicts | " +
		"wait p50 / p99 shared (ms) | wait p50 / p99 / max exclusive (ms) | errors |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- |\n")
}

func WriteMixedRow(b *strings.Builder, target string, clients int, res *Result) {
	m := res.Mixed
	fmt.Fprintf(b, "| %s | %d | %.0f %% | %.0f | %d / %d | %d | %d | %s / %s | %s / %s / %s | %s |\n", target, clients,
		100*m.SharedRatio, res.CyclesPerSec, m.SharedGrants, m.ExclusiveGrants, m.MostHolders, m.Conflicts,
		Num(m.SharedWait.P50), Num(m.SharedWait.P99), Num(m.ExclusiveWait.P50), Num(m.ExclusiveWait.P99), Num(m.ExclusiveWait.Max),
		FormatErrors(res.Errors))
}

// AcquireShared implements SharedAcquirer.
func (s *engineSession) AcquireShared(wait time.Duration) (string, int64, error) {
	s.req.Mode = locks.Shared
	defer func() { s.req.Mode = locks.Exclusive }()
	return s.Acquire(wait)
}
