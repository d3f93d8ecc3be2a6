package safety

import (
	"fmt"
	"net/http"
	"time"
)

// The fault matrix's checks of breaks (the breaker row): a break ends
// every grant of its lock at some moment between its call and its answer,
// or, with a break period (op.ttl), by the period after that moment at the
// latest. So a grant counts as certainly held only until the call of the
// first break that may have ended it (a grant a period lets run on may end
// sooner, with its lease); a grant whose call said "broken" must have had a
// break that could have ended it; and a grant certainly live when a break
// answered 200 must never succeed at a call made after that answer and its
// period.

// mayHaveRun reports whether break b may have changed the lock: it answered
// 200, or its outcome is unknown.
func mayHaveRun(b op) bool { return b.status == http.StatusOK || unknown(b.status) }

// breaksOf returns the breaks of h, per lock.
func (h *history) breaksOf() map[string][]op {
	by := make(map[string][]op)
	for _, o := range h.ops {
		if o.kind == opBreak {
			by[o.lock] = append(by[o.lock], o)
		}
	}
	return by
}

// succeededAfter reports whether a call of g made after t succeeded: g was
// live after t.
func (g *grantRec) succeededAfter(t time.Time) bool {
	for _, e := range g.extends {
		if e.status == http.StatusOK && e.call.After(t) {
			return true
		}
	}
	return g.released != nil && g.released.call.After(t)
}

// breakFindings cuts each grant's certain interval at the first break that
// may have ended it (grantRec.cut, which the other checks then use), and
// returns the answers that contradict the breaks. trusted says whether an
// answer at that time is for good (not when a failover may have lost it).
func (h *history) breakFindings(trusted func(time.Time) bool) []finding {
	breaks := h.breaksOf()
	var fs []finding
	for _, g := range h.grants {
		for _, b := range breaks[g.lock] {
			if !mayHaveRun(b) || !b.ret.After(g.acquired.call) || g.succeededAfter(b.ret.Add(b.ttl)) {
				continue // ran before the grant was made, or the grant outlived it and its period
			}
			if g.cut.IsZero() || b.call.Before(g.cut) {
				g.cut = b.call
			}
		}
		if g.broken != nil && (g.cut.IsZero() || !g.cut.Before(g.broken.ret)) {
			fs = append(fs, finding{kind: answerWrong, lock: g.lock, a: g, msg: fmt.Sprintf(
				"%s: grant %d (%s): %s answered not_holder, reason broken, at %s, and no break of the lock could have ended it",
				g.lock, g.fence, g.prim, g.broken.kind, stamp(g.broken.ret))})
		}
		// A grant received before a break was called, and not released
		// before it answered 200 and its period ran out, was ended by it
		// (or had ended): nothing it calls after that may succeed. A break,
		// like a release, is not acknowledged by the replicas: a failover
		// soon after its answer may lose it, and the grant then runs on
		// (not trusted at the answer).
		for _, b := range breaks[g.lock] {
			end := b.ret.Add(b.ttl)
			if b.status != http.StatusOK || !trusted(b.ret) || !trusted(end) || !g.acquired.ret.Before(b.call) ||
				(!g.releaseCall.IsZero() && g.releaseCall.Before(end)) {
				continue
			}
			for _, e := range append(append([]op{}, g.extends...), opOf(g.released)...) {
				if (e.status == http.StatusOK || e.status == http.StatusNoContent) && e.call.After(end) {
					fs = append(fs, finding{kind: answerWrong, lock: g.lock, a: g, msg: fmt.Sprintf(
						"%s: grant %d (%s): %s called at %s answered %d, after a break called at %s answered 200 at %s",
						g.lock, g.fence, g.prim, e.kind, stamp(e.call), e.status, stamp(b.call), stamp(b.ret))})
				}
			}
		}
	}
	return fs
}

func opOf(o *op) []op {
	if o == nil {
		return nil
	}
	return []op{*o}
}

// mayBreak reports whether a break of lock (or its period's end) may have
// ended a grant between from and to.
func (h *history) mayBreak(lock string, from, to time.Time) bool {
	for _, b := range h.breaksOf()[lock] {
		if mayHaveRun(b) && b.call.Before(to) && b.ret.Add(b.ttl).After(from) {
			return true
		}
	}
	return false
}
