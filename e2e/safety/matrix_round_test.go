package safety

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// roundState is what the rows beyond one history share in a round: the
// round's names and histories, its gateways, and what the watchers saw.
type roundState struct {
	lockNames, semNames []string
	locks, sems         *history
	clients             []func() *client
	// gatewayOf is the index, in the round's gateways, of the gateway
	// each worker (by its id, op.client) calls.
	gatewayOf map[int]int
	watches   watchLog
	// redis reads what Redis holds, for the lease check
	// (matrix_leases_test.go); leases is what it found.
	redis  redisNodes
	leases leaseLog

	mu    sync.Mutex
	notes []roundNote
	// setRefusals are the lock-set row's renewals that answered 409.
	setRefusals []setRefusal
	// sets counts the lock-set row's sets answered 201, by what they
	// asked: what shows that its priorities and caps ran.
	sets setCounts
}

// setCounts counts a round's lock sets answered 201: all of them, those
// that asked for a priority above 0, and those that asked for a cap.
type setCounts struct {
	granted, prioritized, capped int
}

func (c setCounts) String() string {
	return fmt.Sprintf("%d lock sets granted, %d of them at a priority above 0, %d capped", c.granted, c.prioritized, c.capped)
}

func (c *setCounts) add(d setCounts) {
	c.granted, c.prioritized, c.capped = c.granted+d.granted, c.prioritized+d.prioritized, c.capped+d.capped
}

// setGranted counts a set answered 201 that asked opt.
func (rs *roundState) setGranted(opt setOptions) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.sets.granted++
	if opt.prioritized && opt.priority > 0 {
		rs.sets.prioritized++
	}
	if opt.maxHold > 0 {
		rs.sets.capped++
	}
}

// setCounts are the round's set counts so far.
func (rs *roundState) setCounts() setCounts {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.sets
}

// roundNote is a broken promise a client saw; unlessLost: excused when a
// failover may have lost what it is about, between from and to.
type roundNote struct {
	f          finding
	unlessLost bool
}

// note records a finding of the session or watch rows.
func (rs *roundState) note(f finding, unlessLost bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.notes = append(rs.notes, roundNote{f: f, unlessLost: unlessLost})
}

// refusedRenewal records a renewal of a lock set that answered 409, for
// renewalFindings.
func (rs *roundState) refusedRenewal(r setRefusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.setRefusals = append(rs.setRefusals, r)
}

// calm reports whether no failover may have lost writes made between from
// and to (see trusted).
func (f *faulty) calm(from, to time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.lost {
		if to.After(at.Add(-2*time.Second)) && from.Before(at.Add(time.Second)) {
			return false
		}
	}
	return true
}

// findings returns what the session, watch and lock-set rows found in the
// round, once every other check ran (breakFindings cut the broken grants).
func (rs *roundState) findings(f *faulty) []finding {
	var fs []finding
	add := func(n roundNote) {
		switch {
		case n.unlessLost && !f.calm(n.f.from, n.f.to):
		case n.f.unlessBroken && n.f.lock != "" && rs.locks.mayBreak(n.f.lock, n.f.from, n.f.to):
		default:
			fs = append(fs, n.f)
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, n := range rs.notes {
		add(n)
	}
	rs.watchFindings(f, add)
	fs = append(fs, rs.locks.renewalFindings(rs.setRefusals)...)
	fs = append(fs, rs.leaseFindings()...)
	fs = append(fs, rs.locks.minHoldFindings(f.trusted)...)
	return append(fs, rs.locks.setFindings(f.trusted)...)
}

// counts adds what the rows beyond one history did to a round's counts.
func (rs *roundState) counts(by map[string]int) {
	rs.watches.mu.Lock()
	defer rs.watches.mu.Unlock()
	by["watch"] += rs.watches.events
}

// TestShortRoundIsNoFinding: a round too short for its rows to make
// enough grants to show anything (as a busy machine makes them) reports
// them short, and finds nothing, as nothing went wrong.
func TestShortRoundIsNoFinding(t *testing.T) {
	f := startSingle(t)
	f.name = "single"
	nothing := func(_ *testing.T, _ uint64, done <-chan struct{}, _ string, _ []string) ([]string, int) {
		<-done
		return nil, 0
	}
	out := f.round(t, rand.Uint64(), "short", time.Millisecond, nothing)
	for _, fd := range out.findings {
		t.Errorf("got finding %q, want none: the round faulted nothing", fd.msg)
	}
}

// answeredSince says whether a call on name, in either of the round's
// histories, answered after since.
func (rs *roundState) answeredSince(name string, since time.Time) bool {
	return rs.locks.answeredSince(name, since) || rs.sems.answeredSince(name, since)
}
