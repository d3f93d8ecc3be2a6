package safety

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The checks of the lock-set row (matrix_locksets_test.go) that need the
// whole round: when its calls were answered, what could hold their locks,
// and which breaks may have run.

// setRefusal is a renewal of a set that answered 409, and the grants its
// release then said the set no longer held: one of them had ended by the
// renewal's answer.
type setRefusal struct {
	renewal op
	gone    []*grantRec
}

// renewalFindings returns the refused renewals of sets at a time when each
// grant they could be about was within the lease it was last told, and no
// break could have ended it.
func (h *history) renewalFindings(refusals []setRefusal) []finding {
	var fs []finding
	for _, rf := range refusals {
		at := rf.renewal.ret
		if slices.ContainsFunc(rf.gone, func(g *grantRec) bool {
			return !at.Before(g.known) || h.mayBreak(g.lock, g.acquired.call, at)
		}) {
			continue
		}
		var ls []string
		for _, g := range rf.gone {
			ls = append(ls, fmt.Sprintf("%s %d until %s", g.lock, g.fence, stamp(g.known)))
		}
		g := rf.gone[0]
		fs = append(fs, finding{kind: endedEarly, lock: g.lock, prim: g.prim, msg: fmt.Sprintf(
			"a renewal of a set answered 409 %s at %s, when each grant its release said gone was within the lease it was last told (%s), and no break could have ended one",
			rf.renewal.code, stamp(at), strings.Join(ls, ", "))})
	}
	return fs
}

// setCall is one call of the lock-set row, which it records once per lock
// of its set (each with the call's client and time).
type setCall struct {
	client int
	call   time.Time
}

// setFindings returns what the round's set calls broke beyond the other
// checks: a set answered later than setSlack after its wait, and a set
// refused without a wait at a time when no other call could hold any of
// its locks. trusted is as for windows.
func (h *history) setFindings(trusted func(time.Time) bool) []finding {
	sets := make(map[setCall][]op)
	var order []setCall
	for _, o := range h.ops {
		if o.kind != opSetAcquire {
			continue
		}
		k := setCall{o.client, o.call}
		if sets[k] == nil {
			order = append(order, k)
		}
		sets[k] = append(sets[k], o)
	}
	var fs []finding
	wins := h.windows(trusted)
	for _, k := range order {
		calls := sets[k]
		o := calls[0]
		var names []string
		for _, e := range calls {
			names = append(names, e.lock)
		}
		over := o.ret.Sub(o.call) - o.wait
		if o.status == http.StatusConflict && o.code == "not_holder" {
			// A set never held anything its caller knew of: one that
			// lost a lock while it waited is refused lock_held (P22).
			fs = append(fs, finding{kind: answerWrong, lock: o.lock, prim: o.prim, msg: fmt.Sprintf(
				"a set of %s (wait %v) called at %s answered 409 not_holder at %s: a set's refusal is lock_held",
				strings.Join(names, ","), o.wait, stamp(o.call), stamp(o.ret))})
		}
		if slack := setSlack(len(calls)); over > slack {
			fs = append(fs, finding{kind: answerWrong, lock: o.lock, prim: o.prim, msg: fmt.Sprintf(
				"a set of %s (wait %v, priority %d) called at %s answered %d %s at %s, %v after its wait: more than %v",
				strings.Join(names, ","), o.wait, o.priority, stamp(o.call), o.status, o.code, stamp(o.ret), over.Round(time.Millisecond), slack)})
		}
		if o.wait != 0 || o.status != http.StatusConflict {
			continue
		}
		held := false
		for _, n := range names {
			for _, w := range wins[n] {
				other := w.by.client != k.client || !w.by.call.Equal(k.call)
				if other && w.from.Before(o.ret) && o.call.Before(w.to) {
					held = true
				}
			}
		}
		if !held {
			fs = append(fs, finding{kind: heldByNobody, lock: o.lock, prim: o.prim, msg: fmt.Sprintf(
				"a set of %s called at %s answered 409 %s at %s, when no other call could hold any of its locks: held by nobody",
				strings.Join(names, ","), stamp(o.call), o.code, stamp(o.ret))})
		}
	}
	return fs
}

// TestLockSetChecks: the lock-set row's own checks find what they are for,
// and nothing where a break, another call or a lease explains the answer.
func TestLockSetChecks(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	set := func(call, ret int, wait time.Duration, status int, code string, locks ...string) []op {
		var os []op
		for _, l := range locks {
			os = append(os, op{client: 1, lock: l, kind: opSetAcquire, prim: "lockset", ttl: 500*time.Millisecond + wait, wait: wait,
				call: at(call), ret: at(ret), status: status, code: code})
		}
		return os
	}
	held := op{client: 2, lock: "b", kind: opAcquire, prim: "exclusive", ttl: 500 * time.Millisecond, call: at(-100), ret: at(-90), status: http.StatusCreated, fence: 7}
	brk := op{client: 3, lock: "a", kind: opBreak, prim: "breaker", call: at(400), ret: at(410), status: http.StatusOK}
	for name, tc := range map[string]struct {
		ops  []op
		want int
	}{
		"a set refused when no call could hold its locks": {set(0, 10, 0, http.StatusConflict, "lock_held", "a", "b"), 1},
		"a set refused while another call held one":       {append(set(0, 10, 0, http.StatusConflict, "lock_held", "a", "b"), held), 0},
		"a waiting set refused":                           {set(0, 1010, time.Second, http.StatusConflict, "lock_held", "a", "b"), 0},
		"a set answered past its wait and the slack": {
			set(0, int((time.Second+setSlack(2))/time.Millisecond)+1, time.Second, http.StatusCreated, "", "a", "b"), 1},
		"a set answered within its wait and the slack": {
			set(0, int((time.Second+setSlack(2))/time.Millisecond)-1, time.Second, http.StatusCreated, "", "a", "b"), 0},
		"a set told not_holder with no break":   {set(0, 1010, time.Second, http.StatusConflict, "not_holder", "a", "b"), 1},
		"a set told not_holder after a break":   {append(set(0, 1010, time.Second, http.StatusConflict, "not_holder", "a", "b"), brk), 1},
		"a set told not_holder past its lease":  {set(0, 1600, time.Second, http.StatusConflict, "not_holder", "a", "b"), 1},
		"a set refused without a wait, a break": {append(set(400, 405, 0, http.StatusConflict, "lock_held", "a", "b"), brk), 1},
	} {
		t.Run(name, func(t *testing.T) {
			h := &history{ops: tc.ops}
			if got := len(h.setFindings(func(time.Time) bool { return true })); got != tc.want {
				t.Fatalf("got %d findings, want %d", got, tc.want)
			}
		})
	}

	g := &grantRec{lock: "a", fence: 9, prim: "lockset", acquired: op{call: at(0), ret: at(10)}, known: at(1000)}
	renewal := op{kind: opRenew, call: at(300), ret: at(310), status: http.StatusConflict, code: "not_holder"}
	for name, tc := range map[string]struct {
		ops  []op
		gone *grantRec
		want int
	}{
		"a grant within its lease, no break": {nil, g, 1},
		"a grant a break may have ended":     {[]op{{lock: "a", kind: opBreak, call: at(5), ret: at(20), status: http.StatusOK}}, g, 0},
		"a grant whose lease had run out":    {nil, &grantRec{lock: "a", fence: 9, acquired: g.acquired, known: at(200)}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := &history{ops: tc.ops}
			if got := len(h.renewalFindings([]setRefusal{{renewal: renewal, gone: []*grantRec{tc.gone}}})); got != tc.want {
				t.Fatalf("got %d findings, want %d", got, tc.want)
			}
		})
	}
}
