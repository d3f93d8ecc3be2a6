package safety

import (
	"fmt"
	"net/http"
	"time"
)

// The fault matrix's checks of breaks (the breaker row): a break ends
// every grant of its lock at some moment between its call and the latest
// it may have run (ranBy), or, with a break period (op.ttl), by the period
// after that moment at the latest. So a grant counts as certainly held
// only until the call of the first break that may have ended it, or its
// own last call that found it live if that came later (a grant a period
// lets run on may end sooner, with its lease); a grant whose call said
// "broken" must have had a break that could have ended it; and a grant
// certainly live when a break answered 200 must never succeed at a call
// made after that answer and its period.

// mayHaveRun reports whether break b may have changed the lock: it answered
// 200, or its outcome is unknown.
func mayHaveRun(b op) bool { return b.status == http.StatusOK || unknown(b.status) }

// lateRun bounds how long after its call a call whose outcome is unknown
// may still run: its gateway stopped waiting (after --redis-timeout, a
// 503) or died, but the command may still be on its way, held back by a
// proxy (up to 900 ms a chunk, and as long again behind another chunk of
// the same write) and by a Redis pause (up to 600 ms); and a second of
// slack.
const lateRun = 2*900*time.Millisecond + 600*time.Millisecond + time.Second

// ranBy is the latest moment break b may have run: its answer when it
// answered, lateRun after its call when its outcome is unknown. Taking the
// answer for that moment whatever it said was wrong: a 503 says only that
// the gateway stopped waiting, and a break still on its way ends the
// grants live when it arrives, those asked for after the 503 included
// (seen on Cluster as a release answered broken with no break to explain
// it, seed 14306642767817282549).
func ranBy(b op) time.Time {
	if unknown(b.status) && b.call.Add(lateRun).After(b.ret) {
		return b.call.Add(lateRun)
	}
	return b.ret
}

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

// heldAt is the call of g's last call that found it live (a renew or
// re-entry answered 200, its release 204), or zero: whatever the breaks
// did, g certainly held its lock until then, as nothing brings an ended
// grant back.
func (g *grantRec) heldAt() time.Time {
	var at time.Time
	for _, e := range g.extends {
		if e.status == http.StatusOK && e.call.After(at) {
			at = e.call
		}
	}
	if g.released != nil && g.released.call.After(at) {
		at = g.released.call
	}
	return at
}

// breakFindings cuts each grant's certain interval at the first break that
// may have ended it (grantRec.cut, which the other checks then use), and
// returns the answers that contradict the breaks. trusted says whether an
// answer at that time is for good (not when a failover may have lost it).
func (h *history) breakFindings(trusted func(time.Time) bool) []finding {
	breaks := h.breaksOf()
	var fs []finding
	for _, g := range h.grants {
		held := g.heldAt()
		for _, b := range breaks[g.lock] {
			if last := ranBy(b); !mayHaveRun(b) || !last.After(g.acquired.call) || held.After(last.Add(b.ttl)) {
				continue // ran before the grant was made, or the grant outlived it and its period
			}
			// If it ended g, it did after g's last call that found g live:
			// a break of unknown outcome may run long after its call.
			cut := b.call
			if held.After(cut) {
				cut = held
			}
			if g.cut.IsZero() || cut.Before(g.cut) {
				g.cut = cut
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
		if mayHaveRun(b) && b.call.Before(to) && ranBy(b).Add(b.ttl).After(from) {
			return true
		}
	}
	return false
}
