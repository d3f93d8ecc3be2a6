package safety

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"
)

// The fault matrix's checks, on top of findings (overlaps, shared beside
// exclusive, over the limit, fencing tokens repeated or out of real-time
// order, stale writes accepted): answers that contradict a grant's own
// calls, and locks held when no call could hold them.

// heldSlack is how long past the end of a call a grant it may have made
// or extended can last beyond the lease it asked for: a Redis pause (the
// call's command runs when Redis resumes, up to 600 ms later), a waiter's
// queue entry (the waiter lease, 3 s, after its gateway stopped beating for
// it) and then a provisional grant handed to it (at most the waiter lease
// again), a ticket's liveness, and a second of slack.
const heldSlack = 600*time.Millisecond + 2*3*time.Second + ticketLiveness + time.Second

// window is when one call may have held a lock: from its call to the end
// of the longest lease it may have made or extended, cut at the 204 that
// freed its grant.
type window struct {
	from, to time.Time
	by       op
}

// windows returns, per lock, the windows of every call that may have made
// or kept a grant or a queue entry. trusted says whether a 204 answered at
// that time freed its grant for good (not when a failover may have lost
// the release).
func (h *history) windows(trusted func(time.Time) bool) map[string][]window {
	freed := make(map[string]map[int64]time.Time)
	for _, g := range h.grants {
		if !g.freed.IsZero() && g.fence != 0 && trusted(g.freed) {
			if freed[g.lock] == nil {
				freed[g.lock] = make(map[int64]time.Time)
			}
			freed[g.lock][g.fence] = g.freed
		}
	}
	by := make(map[string][]window)
	for _, o := range h.ops {
		switch {
		case o.kind == opRelease, o.kind == opClose, o.kind == opResize, o.kind == opBreak: // they make no grant
			continue
		case o.wait == 0 && o.status >= 400 && o.status < 500: // refused: made nothing
			continue
		}
		w := window{from: o.call, to: o.ret.Add(o.ttl + heldSlack), by: o}
		if f, ok := freed[o.lock][o.fence]; ok && o.fence != 0 && f.Before(w.to) {
			w.to = f
		}
		if end := o.ret.Add(o.minHold + heldSlack); o.minHold > 0 && end.After(w.to) {
			w.to = end // a release inside the min hold keeps the name until it ends
		}
		by[o.lock] = append(by[o.lock], w)
	}
	return by
}

// matrixFindings returns the answers that contradict their grant's calls,
// the server errors other than 503 backend_unavailable (the one way the
// gateway may say that an outcome is unknown), and the refusals (an
// acquire without wait answered 409 lock_held or semaphore_full) at a time
// when fewer than limit calls could hold the name. A semaphore's acquire
// is held to the limit it sent: semaphore_full says that limit was in
// force (another would have been limit_mismatch, which wins), whatever
// resizes did.
func (h *history) matrixFindings(limit int, trusted func(time.Time) bool) []finding {
	var fs []finding
	for _, n := range h.notes {
		if !n.unlessBroken || !h.mayBreak(n.lock, n.from, n.to) {
			fs = append(fs, n)
		}
	}
	for _, g := range h.grants {
		for _, msg := range g.wrong {
			fs = append(fs, finding{kind: answerWrong, lock: g.lock, a: g, msg: msg})
		}
		if !slices.ContainsFunc(g.holdReleases, func(at time.Time) bool { return !trusted(at) }) {
			for _, msg := range g.holdsWrong {
				fs = append(fs, finding{kind: answerWrong, lock: g.lock, a: g, msg: msg})
			}
		}
	}
	for _, o := range h.ops {
		if o.status >= 500 && (o.status != http.StatusServiceUnavailable || o.code != "backend_unavailable") {
			fs = append(fs, finding{kind: answerWrong, lock: o.lock, prim: o.prim, msg: fmt.Sprintf(
				"%s: %s %s called at %s answered %d %s: a server error other than 503 backend_unavailable",
				o.lock, o.prim, o.kind, stamp(o.call), o.status, o.code)})
		}
	}
	wins := h.windows(trusted)
	for _, o := range h.ops {
		if o.kind != opAcquire || o.wait != 0 || o.status != http.StatusConflict || (o.code != "lock_held" && o.code != "semaphore_full") {
			continue
		}
		n, limit := 0, limit
		if o.limit > 0 {
			limit = o.limit
		}
		for _, w := range wins[o.lock] {
			if w.from.Before(o.ret) && o.call.Before(w.to) {
				n++
			}
		}
		if n < limit {
			fs = append(fs, finding{kind: heldByNobody, lock: o.lock, prim: o.prim, msg: fmt.Sprintf(
				"%s: %s acquire called at %s answered 409 %s at %s, when %d calls (fewer than %d) could hold it: held by nobody",
				o.lock, o.prim, stamp(o.call), o.code, stamp(o.ret), n, limit)})
		}
	}
	return fs
}

// heldUntil is when the last grant any call of h may have made on lock
// ends at the latest, and the primitive of that call.
func (h *history) heldUntil(lock string, trusted func(time.Time) bool) (time.Time, string) {
	var last window
	for _, w := range h.windows(trusted)[lock] {
		if w.to.After(last.to) {
			last = w
		}
	}
	return last.to, last.by.prim
}

func (h *history) note(f finding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, f)
}

// prims are the primitives a finding is about.
func (f finding) prims() []string {
	var ps []string
	for _, g := range []*grantRec{f.a, f.b} {
		if g != nil && g.prim != "" {
			ps = append(ps, g.prim)
		}
	}
	if f.prim != "" {
		ps = append(ps, f.prim)
	}
	sort.Strings(ps)
	return ps
}
