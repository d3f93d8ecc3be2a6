package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The fault matrix's lock-set row (TestFaultMatrix): a client takes a set
// of two to four of the round's locks, named in a random order, waiting a
// random while (not at all one time in eight) at a random priority, capped
// one time in two (setAsks), writes to the resource with each lock, renews
// the set one time in two (to a TTL of its own, or to the set's), writes
// again, and releases it. Each lock of an answered
// set enters the round's lock history as an exclusive grant of its own,
// with that lock's fencing token: so every check of the other rows holds
// each of them (no overlap with any grant of the lock, fencing tokens in
// real-time order per lock, no stale write, a name frees by the end of
// the last lease any call may have made), and a set call whose outcome is
// unknown may hold every lock of its set, for its TTL plus its wait (a
// lock taken while the set waits for the next keeps a lease that covers
// the wait). Beyond those, the row checks what a set promises (P22):
//   - a 201 answers every lock asked, each once, with a fencing token:
//     never part of the set;
//   - a set refused without a wait (409) made nothing: it counts as no
//     call that could hold its locks, so a lock it left held shows as a
//     refusal, or a name still held, when no call could hold it; and it
//     must itself have met a lock that some other call could hold;
//   - every set call is answered by the end of its wait plus setSlack,
//     however the sets and the other rows' waiters cross: no deadlock;
//   - a set is never refused not_holder: one that lost a lock it took
//     while it waited for the rest is refused lock_held;
//   - a renewal and a release answer for every lock of the set; a lock
//     they say the set no longer holds, within the lease it was last
//     told, needs a break that may have ended it;
//   - each lock of a capped set states hold_until in every answer, no
//     later than the set's 201 plus the cap, and no lease past it (P23).
//
// Who is served next is not checked (docs/SAFETY.md, P24): under faults
// no order of the waiters is wrong that a dropped and rejoined waiter
// could have made.

// setSlack is how late a set of n locks may be answered after its wait.
// A set waits in its locks' queues one by one (on a single Redis after its
// one script refused it). Each lock's waiter is answered within four Redis
// timeouts of the set's deadline (P5a; TestRandomFaults allows four of
// 500 ms), and so is each lock after the deadline: its one last look is a
// waiting acquire too (a millisecond's wait, in the queue's order), with
// its own leave. Then the set brings the leases back to its TTL or gives
// back what it took, one round trip more (its calls run side by side), and
// a Redis pause (up to 600 ms) may hold up two of the steps. (A flat 4.2 s,
// P5a's four timeouts for the whole set, was passed by 4.3 s and 4.9 s
// answers of sets of three and two locks in a CI run, beside links cut
// and a Redis pause: 503s after every step had timed out.)
func setSlack(n int) time.Duration {
	return time.Duration(4*n+1)*500*time.Millisecond + 2*600*time.Millisecond + time.Second
}

// lockSet is the 201 of POST /lock-sets, and the 200 of a renewal.
type lockSet struct {
	Token     string    `json:"token"`
	Locks     []grant   `json:"locks"`
	ExpiresAt time.Time `json:"expires_at"`
}

// setReleased is the 200 of DELETE /lock-sets.
type setReleased struct {
	Released []string `json:"released"`
	Gone     []string `json:"gone"`
}

func (c *client) acquireSet(ctx context.Context, locks []string, ttl, wait time.Duration) (lockSet, result) {
	return c.acquireSetWith(ctx, locks, ttl, wait, setOptions{})
}

// setOptions is what a set's acquire asks beyond its locks, TTL and wait.
type setOptions struct {
	// priority is the set's priority as a waiter (#39), sent when
	// prioritized: 0 to 9.
	priority    int
	prioritized bool
	// maxHold is the set's max_hold_ms (0: none sent), a cap on each of
	// its locks' grants counted from that lock's acquisition (P23).
	maxHold time.Duration
}

func (c *client) acquireSetWith(ctx context.Context, locks []string, ttl, wait time.Duration, opt setOptions) (lockSet, result) {
	body := fmt.Sprintf(`{"locks":%q,"ttl_ms":%d,"wait_ms":%d`, strings.Join(locks, ","), ttl.Milliseconds(), wait.Milliseconds())
	if opt.prioritized {
		body += fmt.Sprintf(`,"priority":%d`, opt.priority)
	}
	if opt.maxHold > 0 {
		body += fmt.Sprintf(`,"max_hold_ms":%d`, opt.maxHold.Milliseconds())
	}
	r := c.do(ctx, "POST", "/lock-sets", body+"}")
	return decodeAs[lockSet](&r, http.StatusCreated), r
}

// renewSet renews the set of tok to ttl, or without a body (0) to the
// set's TTL.
func (c *client) renewSet(ctx context.Context, locks []string, tok string, ttl time.Duration) (lockSet, result) {
	body := ""
	if ttl > 0 {
		body = fmt.Sprintf(`{"ttl_ms":%d}`, ttl.Milliseconds())
	}
	r := c.do(ctx, "PUT", "/lock-sets/lease?locks="+url.QueryEscape(strings.Join(locks, ",")), body, "Lock-Token", tok)
	return decodeAs[lockSet](&r, http.StatusOK), r
}

func (c *client) releaseSet(ctx context.Context, locks []string, tok string) (setReleased, result) {
	r := c.do(ctx, "DELETE", "/lock-sets?locks="+url.QueryEscape(strings.Join(locks, ",")), "", "Lock-Token", tok)
	return decodeAs[setReleased](&r, http.StatusOK), r
}

// decodeAs decodes r's body into a T when r has status want.
func decodeAs[T any](r *result, want int) T {
	var v T
	if r.status == want && r.err == nil {
		if err := json.Unmarshal(r.body, &v); err != nil {
			r.err = err
		}
	}
	return v
}

// setGrant is a set a client was answered, and its locks' grants.
type setGrant struct {
	w     *worker
	names []string // as asked
	tok   string
	ttl   time.Duration
	recs  map[string]*grantRec
	// maxHold is the cap the set asked for (0: none), and answered
	// when its 201 came: no lock's hold_until may pass answered plus
	// the cap, as each lock was taken before it (capChecks).
	maxHold  time.Duration
	answered time.Time
}

func lockSetCycle(ctx context.Context, w *worker, _ string) {
	names := slices.Clone(w.round.lockNames)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	// Two or three locks, four one time in six: under the round's
	// contention a set of four is seldom granted whole, and a round
	// needs grants to check.
	n := 2 + w.rng.IntN(2)
	if w.rng.IntN(6) == 0 {
		n = 4
	}
	names = names[:n]
	ttl, wait := w.lease(), w.setPatience()
	opt := w.setAsks(ttl, wait)
	call := time.Now()
	s, r := w.client().acquireSetWith(ctx, names, ttl, wait, opt)
	ret := time.Now()
	status := r.status
	if r.err != nil {
		status = 0 // an answer we could not read: unknown
	}
	var code string
	if status >= 400 {
		code = r.code()
	}
	byName := make(map[string]grant)
	for _, l := range s.Locks {
		byName[l.Lock] = l
	}
	if status == http.StatusCreated {
		if missing := partOf(names, s.Locks); missing != "" {
			w.h.note(finding{kind: answerWrong, lock: names[0], prim: w.prim, msg: fmt.Sprintf(
				"a set of %s called at %s answered 201 at %s with %s: %s", strings.Join(names, ","), stamp(call), stamp(ret), lockList(s.Locks), missing)})
		}
	}
	sg := &setGrant{w: w, names: names, tok: s.Token, ttl: ttl, recs: make(map[string]*grantRec), maxHold: opt.maxHold, answered: ret}
	for _, n := range names {
		// A lock the set took while it waited for the next has a lease
		// of its TTL plus what was left of its wait (or less: a cap
		// counts the wait).
		o := op{client: w.id, lock: n, also: othersThan(names, n), kind: opSetAcquire, prim: w.prim, ttl: ttl + wait, wait: wait, call: call, ret: ret, status: status, code: code, detail: r.detailOf(status), priority: opt.priority}
		if g, ok := byName[n]; ok && status == http.StatusCreated {
			o.fence, o.expires = g.FencingToken, g.ExpiresAt
			sg.recs[n] = &grantRec{lock: n, fence: g.FencingToken, acquired: o, known: g.ExpiresAt, prim: w.prim}
		}
		w.h.record(o)
	}
	if status == 0 {
		time.Sleep(time.Duration(20+w.rng.IntN(30)) * time.Millisecond) // no gateway there: a client backs off
	}
	if status == http.StatusCreated {
		w.round.setGranted(opt)
		for _, l := range s.Locks {
			sg.leased(ctx, "set acquire", call, ret, l)
			sg.capped("the set's acquire", ret, l)
		}
		sg.hold(ctx)
	}
}

// setAsks draws what a set asks beyond its locks, TTL and wait: a
// priority, 0 to 9, on four waiting sets in five (it ranks so in each
// lock's queue it joins, P24), and a cap on one set in two, of its TTL
// and up to its wait and a second more, so that a set that waits long
// may lose its first locks to the cap before it has them all (a set
// takes them on a lease the cap cuts, P23).
func (w *worker) setAsks(ttl, wait time.Duration) setOptions {
	var opt setOptions
	if wait > 0 && w.rng.IntN(5) > 0 {
		opt.priority, opt.prioritized = w.rng.IntN(10), true
	}
	if w.rng.IntN(2) == 0 {
		opt.maxHold = ttl + time.Duration(w.rng.IntN(int(wait.Milliseconds())+1000))*time.Millisecond
	}
	return opt
}

// setPatience draws a set's wait: none one time in eight, else up to 2.5 s.
// A set without a wait is refused almost always (one of its locks is
// held, or has waiters, nearly all the time), and a set that waits holds
// its first locks while it waits for the rest: longer waits than a single
// lock's keep the row's grants above the matrix's floor.
func (w *worker) setPatience() time.Duration {
	if w.rng.IntN(8) == 0 { // seldom granted: the refusal's checks
		return 0
	}
	return time.Duration(200+w.rng.IntN(2300)) * time.Millisecond
}

// partOf says what is wrong with a 201's locks for a set of names: a lock
// missing, named twice or not asked for, or without a fencing token; "".
func partOf(names []string, got []grant) string {
	var ls []string
	for _, g := range got {
		if g.FencingToken <= 0 {
			return fmt.Sprintf("%s has no fencing token", g.Lock)
		}
		ls = append(ls, g.Lock)
	}
	if !slices.Equal(ls, names) {
		return fmt.Sprintf("not every lock asked, once each, in the order asked (%d of %d)", len(ls), len(names))
	}
	return ""
}

func lockList(gs []grant) string {
	var ls []string
	for _, g := range gs {
		ls = append(ls, fmt.Sprintf("%s %d", g.Lock, g.FencingToken))
	}
	return "[" + strings.Join(ls, ", ") + "]"
}

// hold is what a client does with a set: write with each lock, renew the
// set one time in two, write again, release it.
func (sg *setGrant) hold(ctx context.Context) {
	w := sg.w
	defer func() {
		for _, n := range sg.names {
			if rec := sg.recs[n]; rec != nil {
				w.h.addGrant(rec)
			}
		}
	}()
	sg.write()
	var refused *op // a renewal that said the set is no longer whole
	if w.rng.IntN(2) == 0 {
		ttl := time.Duration(0) // the set's own
		switch n := w.rng.IntN(4); {
		case n >= 2:
		case sg.maxHold > 0 && n == 0:
			ttl = capRenewal // more than the cap leaves: the answer ends at hold_until
		default:
			ttl = w.lease()
		}
		refused = sg.renew(ctx, ttl)
	}
	if refused == nil {
		sg.write()
	}
	sg.release(ctx, refused)
}

// leased checks that Redis holds the lease on l's lock that a set call
// (called at call, answered at ret) answered (matrix_leases_test.go).
func (sg *setGrant) leased(ctx context.Context, what string, call, ret time.Time, l grant) {
	sg.w.checkLease(ctx, leaseAnswer{what: what, name: l.Lock, kind: exclusiveHold, token: setOwnerToken(sg.tok, l.Lock),
		fence: l.FencingToken, call: call, ret: ret, expires: l.ExpiresAt})
}

// capped holds l, a lock of the set answered at ret in what, to the
// set's cap: it states hold_until, no later than the set's 201 plus the
// cap, and a lease that ends no later than that (capChecks).
func (sg *setGrant) capped(what string, ret time.Time, l grant) {
	rec := sg.recs[l.Lock]
	if sg.maxHold == 0 || rec == nil {
		return
	}
	if msg := capChecks(heldGrant{got: op{ret: sg.answered}, maxHold: sg.maxHold}, what, op{ret: ret}, l); msg != "" {
		rec.wrong = append(rec.wrong, fmt.Sprintf("%s: grant %d (%s, a set's lock): %s", l.Lock, rec.fence, sg.w.prim, msg))
	}
}

func (sg *setGrant) write() {
	for _, n := range sg.names {
		rec := sg.recs[n]
		if rec == nil {
			continue
		}
		ww := grantWrite{call: time.Now(), known: rec.known}
		ww.accepted = sg.w.res.write(n, rec.fence)
		ww.ret = time.Now()
		rec.writes = append(rec.writes, ww)
	}
}

// ops records, per lock of the set, a call o made with the status each
// lock got from it.
func (sg *setGrant) ops(o op, status func(name string) int) {
	for _, n := range sg.names {
		e := o
		e.lock, e.also, e.status = n, othersThan(sg.names, n), status(n)
		if rec := sg.recs[n]; rec != nil {
			e.fence = rec.fence
			if e.kind == opRenew {
				rec.extends = append(rec.extends, e)
			}
		}
		sg.w.h.record(e)
	}
}

// renew renews the set to ttl (0: the set's TTL), and returns the call if
// it answered 409: some lock of the set was no longer held.
func (sg *setGrant) renew(ctx context.Context, ttl time.Duration) *op {
	w := sg.w
	o := w.op(opRenew, "", ttl, 0)
	if ttl == 0 {
		o.ttl = sg.ttl
	}
	l, r := w.client().renewSet(ctx, sg.names, sg.tok, ttl)
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0
	}
	if o.status >= 400 {
		o.code = r.code()
	}
	o.detail = r.detailOf(o.status)
	byName := make(map[string]grant)
	for _, g := range l.Locks {
		byName[g.Lock] = g
	}
	switch {
	case o.status == http.StatusOK:
		if missing := partOf(sg.names, l.Locks); missing != "" {
			w.h.note(finding{kind: answerWrong, lock: sg.names[0], prim: w.prim, msg: fmt.Sprintf(
				"a renewal of the set %s called at %s answered 200 at %s with %s: %s", strings.Join(sg.names, ","), stamp(o.call), stamp(o.ret), lockList(l.Locks), missing)})
		}
		for n, rec := range sg.recs {
			g, ok := byName[n]
			switch {
			case !ok:
			case g.FencingToken != rec.fence:
				rec.wrong = append(rec.wrong, fmt.Sprintf("%s: grant %d (%s): a renewal of its set answered at %s gave it fencing token %d",
					n, rec.fence, w.prim, stamp(o.ret), g.FencingToken))
			default:
				rec.known = g.ExpiresAt
				sg.leased(ctx, "set renewal", o.call, o.ret, g)
				sg.capped("a renewal of the set", o.ret, g)
			}
		}
		sg.ops(o, func(n string) int {
			if _, ok := byName[n]; ok {
				return http.StatusOK
			}
			return 0
		})
	case o.status == http.StatusConflict:
		// Every lock the set still held was renewed all the same, and the
		// answer does not say which one it no longer held: to the client,
		// each lock's outcome is unknown (the release says which).
		sg.ops(o, func(string) int { return 0 })
		return &o
	default:
		sg.ops(o, func(string) int { return o.status })
	}
	return nil
}

// release releases the set. A lock it says the set no longer held, within
// the lease the set was last told, needs a break that may have ended it;
// and so does one of them, when a renewal said the set was not whole
// (refused), within the lease each was told then.
func (sg *setGrant) release(ctx context.Context, refused *op) {
	w := sg.w
	o := w.op(opRelease, "", 0, 0)
	for _, rec := range sg.recs {
		rec.releaseCall = o.call
	}
	a, r := w.client().releaseSet(ctx, sg.names, sg.tok)
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0
	}
	if o.status >= 400 {
		o.code = r.code()
	}
	o.detail = r.detailOf(o.status)
	var gone []string
	switch o.status {
	case http.StatusOK:
		got := append(slices.Clone(a.Released), a.Gone...)
		slices.Sort(got)
		if !slices.Equal(got, slices.Sorted(slices.Values(sg.names))) {
			w.h.note(finding{kind: answerWrong, lock: sg.names[0], prim: w.prim, msg: fmt.Sprintf(
				"a release of the set %s called at %s answered 200 at %s, released %v and gone %v: not every lock of the set once",
				strings.Join(sg.names, ","), stamp(o.call), stamp(o.ret), a.Released, a.Gone)})
		}
		for _, n := range a.Released {
			if rec := sg.recs[n]; rec != nil {
				rel := o
				rel.lock, rel.fence, rel.status = n, rec.fence, http.StatusNoContent
				rec.released, rec.freed = &rel, o.ret
			}
		}
		gone = a.Gone
		sg.ops(o, func(n string) int {
			if slices.Contains(a.Released, n) {
				return http.StatusNoContent
			}
			return http.StatusConflict
		})
	case http.StatusConflict: // it held none of them
		gone = sg.names
		sg.ops(o, func(string) int { return o.status })
	default:
		sg.ops(o, func(string) int { return o.status })
	}
	var recs []*grantRec
	for _, n := range gone {
		rec := sg.recs[n]
		if rec == nil {
			continue
		}
		recs = append(recs, rec)
		if o.ret.Before(rec.known) {
			// A break that ran while the set was acquired may have ended
			// this grant before the 201 came back.
			w.h.note(finding{kind: endedEarly, lock: n, prim: w.prim, unlessBroken: true, from: rec.acquired.call, to: o.ret, msg: fmt.Sprintf(
				"%s: grant %d (%s): a release of its set answered at %s said the set no longer held it, within the lease it was last told (until %s)",
				n, rec.fence, w.prim, stamp(o.ret), stamp(rec.known))})
		}
	}
	if refused != nil && (o.status == http.StatusOK || o.status == http.StatusConflict) {
		if len(recs) == 0 {
			w.round.note(finding{kind: answerWrong, lock: sg.names[0], prim: w.prim, from: refused.call, to: o.ret, msg: fmt.Sprintf(
				"a renewal of the set %s answered 409 %s at %s, and its release answered at %s that the set held every lock",
				strings.Join(sg.names, ","), refused.code, stamp(refused.ret), stamp(o.ret))}, true)
		} else {
			w.round.refusedRenewal(setRefusal{renewal: *refused, gone: recs})
		}
	}
	if o.status == 0 {
		time.Sleep(time.Duration(20+w.rng.IntN(30)) * time.Millisecond) // a client backs off
	}
}

// othersThan are names but n: the other locks of a set's call.
func othersThan(names []string, n string) []string {
	var ns []string
	for _, m := range names {
		if m != n {
			ns = append(ns, m)
		}
	}
	return ns
}
