package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The min hold and hard cap rows of the fault matrix (#39): acquires that
// carry min_hold_ms (the name stays kept after an early release, until
// acquired_at + min_hold_ms) and max_hold_ms (no lease passes
// acquired_at + max_hold_ms, and every answer says hold_until). Their
// checks: hold hands every answer of a capped grant to capChecks, and
// minHoldFindings looks, once the round is over, for a grant of the name
// answered inside a min hold kept after its release. Their windows
// (history.windows) last past a release until the min hold ends at the
// latest, so that a refusal then is no "held by nobody".

// acquireHolding acquires lock with a min hold and a hard cap (0: none),
// shared or not.
func (c *client) acquireHolding(ctx context.Context, lock string, ttl, wait, minHold, maxHold time.Duration, shared bool) (grant, result) {
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d`, ttl.Milliseconds(), wait.Milliseconds())
	if minHold > 0 {
		body += fmt.Sprintf(`,"min_hold_ms":%d`, minHold.Milliseconds())
	}
	if maxHold > 0 {
		body += fmt.Sprintf(`,"max_hold_ms":%d`, maxHold.Milliseconds())
	}
	if shared {
		body += `,"mode":"shared"`
	}
	r := c.do(ctx, "POST", "/locks/"+lock, body+"}")
	var g grant
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

// minHoldCycle takes a lock with a min hold of up to half a second (most
// holders release before it ends: then it rests), and holds it as the
// exclusive row does.
func minHoldCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	o := w.op(opAcquire, lock, ttl, wait)
	o.minHold = time.Duration(100+w.rng.IntN(400)) * time.Millisecond
	g, r := w.client().acquireHolding(ctx, lock, ttl, wait, o.minHold, 0, false)
	if o = w.finish(o, r, g); o.status == http.StatusCreated {
		w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, renew: w.rng.IntN(2) == 0})
	}
}

// maxHoldCycle takes a lock (shared one time in four) with a hard cap of
// its lease and up to a second more, and renews it asking for more than
// any cap leaves (see heldGrant.maxHold), or re-enters it.
func maxHoldCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	maxHold := ttl + time.Duration(w.rng.IntN(1000))*time.Millisecond
	shared := w.rng.IntN(4) == 0
	o := w.op(opAcquire, lock, ttl, wait)
	g, r := w.client().acquireHolding(ctx, lock, ttl, wait, 0, maxHold, shared)
	if o = w.finish(o, r, g); o.status == http.StatusCreated {
		w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, shared: shared, renew: true, reenter: w.rng.IntN(2), maxHold: maxHold})
	}
}

// capRenewal is what a capped grant's renewal asks for: more than any
// cap of the row leaves, so that its answer ends at hold_until.
const capRenewal = 2*maxLease + time.Second

// capChecks returns what is wrong with answer g (what, answered as o) of
// the grant hd, whose cap is hd.maxHold: it states hold_until, no later
// than the acquire's answer plus the cap (the grant was made before that
// answer; a millisecond of slack, as Redis counts whole ones), and a
// lease that ends no later than it. "" when all is well.
func capChecks(hd heldGrant, what string, o op, g grant) string {
	latest := hd.got.ret.Add(hd.maxHold + time.Millisecond)
	switch {
	case g.HoldUntil == nil:
		return fmt.Sprintf("%s answered at %s without hold_until, under a cap of %v", what, stamp(o.ret), hd.maxHold)
	case g.HoldUntil.After(latest):
		return fmt.Sprintf("%s answered hold_until %s at %s: past the acquire's answer (%s) plus its cap of %v",
			what, stamp(*g.HoldUntil), stamp(o.ret), stamp(hd.got.ret), hd.maxHold)
	case g.ExpiresAt.After(*g.HoldUntil):
		return fmt.Sprintf("%s answered at %s a lease to %s, past its hold_until %s", what, stamp(o.ret), stamp(g.ExpiresAt), stamp(*g.HoldUntil))
	}
	return ""
}

// minHoldFindings returns the grants of a name answered while an earlier
// grant's min hold kept it: a grant released by a 204 (it was live until
// then, and rested after) keeps the name until its acquisition plus its
// min hold, no earlier than its acquire's call plus that (less a
// millisecond: Redis counts whole ones), so no later grant (a higher
// fencing token) may be answered before. Excused: a release around a
// failover, which may have lost the rest (trusted), and a break, which
// ends a min hold.
func (h *history) minHoldFindings(trusted func(time.Time) bool) []finding {
	var fs []finding
	for _, g := range h.grants {
		mh := g.acquired.minHold
		if mh == 0 || g.released == nil || !trusted(g.released.ret) {
			continue
		}
		end := g.acquired.call.Add(mh - time.Millisecond)
		for _, o := range h.grants {
			if o.lock != g.lock || o.fence <= g.fence || o.acquired.ret.IsZero() || !o.acquired.ret.Before(end) ||
				h.mayBreak(g.lock, g.acquired.call, o.acquired.ret) {
				continue
			}
			fs = append(fs, finding{kind: answerWrong, lock: g.lock, a: g, b: o, msg: fmt.Sprintf(
				"%s: grant %d (%s, min_hold_ms %d, called at %s, released at %s) kept the name until %s at the earliest, but grant %d (%s) was answered at %s",
				g.lock, g.fence, g.prim, mh.Milliseconds(), stamp(g.acquired.call), stamp(g.released.ret), stamp(end), o.fence, o.prim, stamp(o.acquired.ret))})
		}
	}
	return fs
}
