package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// The semaphore row's resizes (TestFaultMatrix). A holder of a permit
// lowers the semaphore's limit to 1 or 2, works, and sets it back to
// semLimit before it releases; acquirers follow, sending the limit a 409
// limit_mismatch names. No limit in force is ever above semLimit, so the
// round's bound of semLimit holders still holds (findings, overLimit), and
// a raise back to it, which hands permits to waiters at once, must not
// hand out more. A lowered limit takes no permit back, so holders may be
// above it for a while: the promise is that no permit is granted while as
// many hold as the limit in force. loweredFindings checks that where the
// history makes it certain.

// resize is PUT /semaphores/{name}/limit.
func (c *client) resize(ctx context.Context, name string, limit int) result {
	return c.do(ctx, "PUT", "/semaphores/"+name+"/limit", fmt.Sprintf(`{"limit":%d}`, limit))
}

// limit is the limit a 409 limit_mismatch names, or 0.
func (r result) limit() int {
	var p struct {
		Limit int `json:"limit"`
	}
	json.Unmarshal(r.body, &p)
	return p.Limit
}

// resizeLimits lowers the limit of the semaphore hd holds a permit of,
// works a while (within the lease it knows of), and sets the limit back to
// semLimit, retrying that while its outcome is unknown, as a client would.
func (w *worker) resizeLimits(ctx context.Context, c *client, hd heldGrant, rec *grantRec) {
	call := func(limit int) op {
		o := w.op(opResize, hd.lock, 0, 0)
		o.fence, o.limit = rec.fence, limit
		return w.finish(o, c.resize(ctx, hd.lock, limit), grant{})
	}
	call(1 + w.rng.IntN(semLimit-1))
	work := time.Duration(50+w.rng.IntN(250)) * time.Millisecond
	time.Sleep(min(work, max(time.Until(rec.known), 0))) // the work, not synchronisation
	for range 3 {
		if o := call(semLimit); !unknown(o.status) {
			return
		}
	}
}

// loweredFindings returns the permits granted while at least as many
// grants certainly held the semaphore as the lowered limit certainly in
// force. A resize to limit L < semLimit answered 200 makes L the limit in
// force from its answer for as long as its caller's permit certainly
// holds (so the semaphore is not idle, which would forget L), until the
// next resize is called. A resize that may have run after it (one whose
// call overlaps it, or, with an unknown outcome, that may have landed up
// to heldSlack after its answer) may have set its own limit: the bound is
// the larger. A grant whose acquire was called and answered within that
// window was made at some moment of its call; the grants that certainly
// held through the whole call held at that moment: if they were as many
// as the bound, the grant broke the promise. checked counts the grants it
// could judge.
func (h *history) loweredFindings() (fs []finding, checked int) {
	grants := make(map[string][]*grantRec)
	for _, g := range h.grants {
		if g.fence != 0 {
			grants[g.lock] = append(grants[g.lock], g)
		}
	}
	resizes := make(map[string][]op)
	for _, o := range h.ops {
		if o.kind == opResize && (o.status == http.StatusOK || unknown(o.status)) {
			resizes[o.lock] = append(resizes[o.lock], o)
		}
	}
	for lock, rs := range resizes {
		for i, r := range rs {
			if r.status != http.StatusOK || r.limit >= semLimit {
				continue
			}
			by := slices.IndexFunc(grants[lock], func(g *grantRec) bool { return g.fence == r.fence })
			if by < 0 {
				continue
			}
			resizer := grants[lock][by]
			from, to, bound := r.ret, resizer.end(), r.limit
			for j, r2 := range rs {
				landed := r2.ret // by when it ran, at the latest
				if unknown(r2.status) {
					landed = r2.ret.Add(heldSlack)
				}
				switch {
				case j == i, !r2.call.Before(to), !landed.After(r.call): // itself, after the window, certainly before r
				case !r2.call.Before(from):
					to = r2.call
				default:
					bound = max(bound, r2.limit)
				}
			}
			if bound >= semLimit || !from.Before(to) {
				continue // the bound of semLimit is overLimit's
			}
			for _, a := range grants[lock] {
				if a == resizer || a.acquired.call.Before(from) || a.acquired.ret.After(to) {
					continue
				}
				checked++
				var held []int64
				for _, b := range grants[lock] {
					if b != a && !b.acquired.ret.After(a.acquired.call) && !b.end().Before(a.acquired.ret) {
						held = append(held, b.fence)
					}
				}
				if len(held) >= bound {
					slices.Sort(held)
					fs = append(fs, finding{kind: tooMany, lock: lock, a: a, msg: fmt.Sprintf(
						"%s: permit %d was granted within [%s, %s] (its acquire called at %s, answered at %s), while the limit in force was at most %d "+
							"(lowered by the holder of permit %d, answered at %s) and %d grants certainly held it: fencing tokens %v",
						lock, a.fence, stamp(from), stamp(to), stamp(a.acquired.call), stamp(a.acquired.ret), bound,
						resizer.fence, stamp(r.ret), len(held), held)})
				}
			}
		}
	}
	return fs, checked
}

// TestLoweredFindings: the check flags a permit granted, within a lowered
// limit certainly in force, while as many held as that limit, and nothing
// when a resize that may have run later sets the bound back to semLimit.
func TestLoweredFindings(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	grant := func(fence int64, call, ret, end int) *grantRec {
		return &grantRec{lock: "s", fence: fence, acquired: op{call: at(call), ret: at(ret)}, known: at(end), prim: "semaphore"}
	}
	resize := func(fence int64, limit, call, ret, status int) op {
		return op{lock: "s", kind: opResize, fence: fence, limit: limit, call: at(call), ret: at(ret), status: status}
	}
	resizer := grant(1, 0, 10, 5000)
	for name, tc := range map[string]struct {
		ops    []op
		grants []*grantRec
		want   int
	}{
		"granted while the one holder was at the lowered limit": {
			[]op{resize(1, 1, 100, 110, http.StatusOK)}, []*grantRec{resizer, grant(2, 200, 210, 3000)}, 1},
		"granted at a limit of 2 with one holder": {
			[]op{resize(1, 2, 100, 110, http.StatusOK)}, []*grantRec{resizer, grant(2, 200, 210, 3000)}, 0},
		"granted after the limit was set back": {
			[]op{resize(1, 1, 100, 110, http.StatusOK), resize(1, 3, 150, 160, http.StatusOK)}, []*grantRec{resizer, grant(2, 200, 210, 3000)}, 0},
		"a raise of unknown outcome may have landed later": {
			[]op{resize(3, 3, 50, 90, 0), resize(1, 1, 100, 110, http.StatusOK)}, []*grantRec{resizer, grant(2, 200, 210, 3000)}, 0},
		"asked for before the lowering": {
			[]op{resize(1, 1, 100, 110, http.StatusOK)}, []*grantRec{resizer, grant(2, 50, 210, 3000)}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := &history{ops: tc.ops, grants: tc.grants}
			if got, _ := h.loweredFindings(); len(got) != tc.want {
				t.Fatalf("got %d findings %v, want %d", len(got), got, tc.want)
			}
		})
	}
}
