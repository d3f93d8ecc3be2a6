package safety

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// The rows of the fault matrix (TestFaultMatrix): each primitive is one
// kind of critical section a client goes through, recorded in the round's
// history. The lock primitives share the round's locks, so that the checker
// sees them exclude (or admit) each other; the semaphore takes the round's
// semaphores. Adding a primitive is adding a row here.
var primitives = []primitive{
	{name: "exclusive", cycle: exclusiveCycle},
	{name: "shared", cycle: sharedCycle},
	{name: "reentrant", cycle: reentrantCycle},
	{name: "semaphore", sem: true, cycle: semaphoreCycle},
	{name: "ticket", cycle: ticketCycle},
	{name: "idempotent", cycle: idempotentCycle},
	{name: "breaker", cycle: breakerCycle},             // counted by its breaks answered 200
	{name: "session", cycle: sessionCycle, workers: 6}, // matrix_sessions_test.go
	{name: "watch", cycle: watchCycle},                 // counted by what it saw; matrix_watches_test.go
	{name: "lockset", cycle: lockSetCycle, workers: 6}, // matrix_locksets_test.go
	{name: "minhold", cycle: minHoldCycle},             // matrix_caps_test.go
	{name: "maxhold", cycle: maxHoldCycle},             // matrix_caps_test.go
}

// primitive is one row of the matrix.
type primitive struct {
	name string
	// sem: the primitive takes the round's semaphores (of semLimit
	// permits), and is checked against that limit; else the round's locks.
	sem bool
	// cycle is one attempt at a critical section on name.
	cycle func(ctx context.Context, w *worker, name string)
	// workers is how many clients run the row in a round, on the
	// gateways in turn; 3 (one per gateway) when zero. A row whose
	// cycle is long (a session's lasts seconds) or seldom granted (a lock
	// set needs each of its locks free at once) has more, so that a
	// faulted round still makes enough grants to show anything (a test
	// may ask for more: faulty.rowWorkers).
	workers int
}

// clients is how many workers run p in a round.
func (p primitive) clients() int { return cmp.Or(p.workers, 3) }

// semLimit is the limit of the round's semaphores: the one their
// acquires send, and the most any resize sets (see resizeLimits).
const semLimit = 3

// worker is one client of a round, with its own seeded choices.
type worker struct {
	id     int
	prim   string
	rng    *rand.Rand
	client func() *client // its gateway's client, as it is now (gateways restart)
	h      *history       // the round's history of its primitive's names
	res    *resource
	round  *roundState // what the rows beyond one history share
}

// lease draws a TTL for a grant, up to maxLease: short, so that leases
// run out under the faults.
func (w *worker) lease() time.Duration { return time.Duration(200+w.rng.IntN(1300)) * time.Millisecond }

// maxLease is the longest lease a worker draws.
const maxLease = 1500 * time.Millisecond

// patience draws a wait: none for 3 in 10 calls.
func (w *worker) patience() time.Duration {
	if w.rng.IntN(10) < 3 {
		return 0
	}
	return time.Duration(100+w.rng.IntN(1900)) * time.Millisecond
}

// finish completes o with r's answer and records it.
func (w *worker) finish(o op, r result, g grant) op {
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0 // an answer we could not read: unknown
	}
	if r.status == 0 {
		// No gateway there (killed, starting again): a client backs off.
		time.Sleep(time.Duration(20+w.rng.IntN(30)) * time.Millisecond)
	}
	if o.status >= 400 {
		o.code = r.code()
	}
	o.detail = r.detailOf(o.status)
	if o.status == http.StatusCreated || o.status == http.StatusOK {
		if o.fence == 0 {
			o.fence = g.FencingToken
		}
		o.expires = g.ExpiresAt
	}
	w.h.record(o)
	return o
}

func (w *worker) op(kind opKind, lock string, ttl, wait time.Duration) op {
	return op{client: w.id, lock: lock, kind: kind, prim: w.prim, ttl: ttl, wait: wait, call: time.Now()}
}

func unknown(status int) bool { return status == 0 || status >= 500 }

func exclusiveCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	o := w.op(opAcquire, lock, ttl, wait)
	g, r := w.client().acquire(ctx, lock, ttl, wait)
	if o = w.finish(o, r, g); o.status == http.StatusCreated {
		w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, renew: w.rng.IntN(2) == 0})
	}
}

func sharedCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	o := w.op(opAcquire, lock, ttl, wait)
	g, r := w.client().acquireShared(ctx, lock, ttl, wait)
	if o = w.finish(o, r, g); o.status == http.StatusCreated {
		w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, shared: true, renew: w.rng.IntN(2) == 0})
	}
}

// reentrantCycle takes a lock (shared one time in four) and re-enters it
// once or twice; hold releases every hold it was told of.
func reentrantCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	shared := w.rng.IntN(4) == 0
	o := w.op(opAcquire, lock, ttl, wait)
	var g grant
	var r result
	if shared {
		g, r = w.client().acquireShared(ctx, lock, ttl, wait)
	} else {
		g, r = w.client().acquire(ctx, lock, ttl, wait)
	}
	if o = w.finish(o, r, g); o.status == http.StatusCreated {
		w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, shared: shared, reenter: 1 + w.rng.IntN(2), renew: w.rng.IntN(3) == 0})
	}
}

// semaphoreCycle takes a permit, sending semLimit, or the limit in force
// that a 409 limit_mismatch names (a holder resized it), as a client that
// follows resizes does; one holder in three lowers the limit for a while
// (see resizeLimits).
func semaphoreCycle(ctx context.Context, w *worker, name string) {
	ttl, wait := w.lease(), w.patience()
	limit := semLimit
	for range 2 {
		o := w.op(opAcquire, name, ttl, wait)
		o.limit = limit
		g, r := w.client().acquireAny(ctx, limit, name, ttl, wait)
		switch o = w.finish(o, r, g); {
		case o.status == http.StatusCreated:
			w.hold(ctx, heldGrant{lock: name, g: g, got: o, ttl: ttl, limit: limit, renew: w.rng.IntN(2) == 0, resize: w.rng.IntN(3) == 0})
			return
		case o.code == "limit_mismatch" && r.limit() > 0:
			limit = r.limit()
		default:
			return
		}
	}
}

// ticketLiveness is the gateways' --ticket-liveness in the matrix; a
// ticket is polled well within it.
const ticketLiveness = 2 * time.Second // the gateway's least (twice a long poll's keep-alive)

// ticketCycle asks with Prefer: respond-async and polls its ticket until
// the lock reaches it or the wait runs out; a ticket it gives up on, it
// closes (which releases a grant handed to it).
func ticketCycle(ctx context.Context, w *worker, lock string) {
	ttl := w.lease()
	wait := time.Duration(300+w.rng.IntN(2200)) * time.Millisecond
	open := w.op(opAcquire, lock, ttl, wait)
	g, tk, r := w.client().openTicket(ctx, lock, ttl, wait)
	open = w.finish(open, r, g)
	switch open.status {
	case http.StatusCreated:
		w.hold(ctx, heldGrant{lock: lock, g: g, got: open, ttl: ttl, renew: w.rng.IntN(2) == 0})
		return
	case http.StatusAccepted:
	default:
		return
	}
	giveUp := open.call.Add(wait + 2*time.Second)
	for time.Now().Before(giveUp) && ctx.Err() == nil {
		time.Sleep(time.Duration(100+w.rng.IntN(200)) * time.Millisecond) // between polls, well within the liveness
		o := w.op(opPoll, lock, ttl, wait)
		g, r := w.client().poll(ctx, tk)
		o = w.finish(o, r, g)
		switch {
		case o.status == http.StatusCreated:
			// The grant was asked for when the ticket was opened.
			got := o
			got.call = open.call
			w.hold(ctx, heldGrant{lock: lock, g: g, got: got, ttl: ttl, renew: w.rng.IntN(2) == 0})
			return
		case o.status == http.StatusOK, unknown(o.status):
		default: // 404: dropped, or its wait ran out
			return
		}
	}
	o := w.op(opClose, lock, ttl, 0)
	w.finish(o, w.client().closeTicket(ctx, tk), grant{})
}

// idempotentCycle acquires with an Idempotency-Key, and retries with the
// same key while the outcome is unknown: a retry must get the grant the
// lost call made, while it lives.
func idempotentCycle(ctx context.Context, w *worker, lock string) {
	ttl, wait := w.lease(), w.patience()
	key := fmt.Sprintf("w%d-%d", w.id, w.rng.Uint64())
	var first op // the first call whose outcome was unknown
	for range 4 {
		o := w.op(opAcquire, lock, ttl, wait)
		g, r := w.client().acquireOnce(ctx, lock, key, ttl, wait)
		o = w.finish(o, r, g)
		switch {
		case o.status == http.StatusCreated:
			w.hold(ctx, heldGrant{lock: lock, g: g, got: o, ttl: ttl, renew: w.rng.IntN(2) == 0})
			return
		case unknown(o.status):
			if first.call.IsZero() {
				first = o
			}
		case o.code == "idempotency_in_progress":
		case o.code == "grant_ended" && !first.call.IsZero() && o.ret.Before(first.call.Add(ttl)):
			// The lost call's grant, if it made one, was made after
			// first.call: its lease cannot have run out yet.
			w.h.note(finding{kind: answerWrong, lock: lock, prim: w.prim, unlessBroken: true, from: first.call, to: o.ret, msg: fmt.Sprintf(
				"%s: retry with the Idempotency-Key of a call with an unknown outcome (called at %s) answered grant_ended at %s, within the lease that grant would have had (%v)",
				lock, stamp(first.call), stamp(o.ret), ttl)})
			return
		default:
			return
		}
		time.Sleep(time.Duration(50+w.rng.IntN(200)) * time.Millisecond) // before the retry
	}
}

// breakerCycle is an administrator who, now and then, breaks one of the
// round's locks, whoever holds it: half the time at once, else with a
// break period (kept in the op's ttl) of up to 1.5 s.
func breakerCycle(ctx context.Context, w *worker, lock string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(300+w.rng.IntN(1200)) * time.Millisecond): // between breaks
	}
	var period time.Duration
	if w.rng.IntN(2) == 0 {
		period = time.Duration(100+w.rng.IntN(1400)) * time.Millisecond
	}
	o := w.op(opBreak, lock, period, 0)
	w.finish(o, w.client().breakLock(ctx, lock, period), grant{})
}

// heldGrant is a grant a client was answered, and what it will do with it.
type heldGrant struct {
	lock    string
	g       grant
	got     op // the call that answered the grant
	ttl     time.Duration
	shared  bool
	limit   int // a semaphore's permit, when above 0
	reenter int // re-entries to make
	renew   bool
	// resize: a permit's holder lowers the semaphore's limit, works, and
	// sets it back to semLimit before it releases (see resizeLimits).
	resize bool
	// maxHold is the grant's hard cap (the maxhold row): its renewal asks
	// for capRenewal, and every answer is held to it (capChecks).
	maxHold time.Duration
}

// hold is what a client does with a grant: write to the resource (when it
// holds the lock exclusively), re-enter it, perhaps renew it, write again,
// then release every hold it knows of. Answers that contradict what the
// grant's own calls said (a hold counted twice, a lock freed with holds
// left) are noted while every call on the grant had a known outcome.
func (w *worker) hold(ctx context.Context, hd heldGrant) {
	c := w.client()
	rec := &grantRec{lock: hd.lock, fence: hd.g.FencingToken, shared: hd.shared, acquired: hd.got, known: hd.g.ExpiresAt, prim: w.prim}
	defer w.h.addGrant(rec)
	wrong := func(format string, args ...any) {
		rec.wrong = append(rec.wrong, fmt.Sprintf("%s: grant %d (%s): ", hd.lock, rec.fence, w.prim)+fmt.Sprintf(format, args...))
	}
	write := func() {
		if w.res == nil || hd.shared || hd.limit > 0 {
			return
		}
		ww := grantWrite{call: time.Now(), known: rec.known}
		ww.accepted = w.res.write(hd.lock, rec.fence)
		ww.ret = time.Now()
		rec.writes = append(rec.writes, ww)
	}
	gone := func(o op, r result) { // a 409 on the grant: not ours any more
		switch {
		case o.code == "not_holder" && r.reason() == "broken":
			rec.broken = &o // checked against the round's breaks
		case o.ret.Before(rec.known):
			rec.endedEarly = &o
		}
	}
	holds, sure := 1, true // sure: every call on the grant had a known outcome
	ids := []string{""}    // the holds by id: the acquire's own, then each re-entry's
	if hd.g.Holds > 1 {
		wrong("a new grant answered %d holds", hd.g.Holds)
	}
	kind := exclusiveHold
	switch {
	case hd.limit > 0:
		kind = permitHold
	case hd.shared:
		kind = sharedHold
	}
	leased := func(what string, o op, expires time.Time) { // Redis holds what o answered
		w.checkLease(ctx, leaseAnswer{what: what, name: hd.lock, kind: kind, token: hd.g.Token, fence: rec.fence, call: o.call, ret: o.ret, expires: expires})
	}
	capped := func(what string, o op, g grant) {
		if hd.maxHold > 0 {
			if msg := capChecks(hd, what, o, g); msg != "" {
				wrong("%s", msg)
			}
		}
	}
	leased("acquire", hd.got, hd.g.ExpiresAt)
	capped("the acquire", hd.got, hd.g)
	write()
	for range hd.reenter {
		o := w.op(opReenter, hd.lock, hd.ttl, 0)
		o.fence = rec.fence
		re, r := c.reenter(ctx, hd.lock, hd.g.Token, hd.ttl)
		o = w.finish(o, r, re)
		rec.extends = append(rec.extends, o)
		switch {
		case o.status == http.StatusOK:
			holds++
			ids = append(ids, re.Hold)
			leased("re-entry", o, re.ExpiresAt)
			capped("a re-entry", o, re)
			if sure && re.Holds != holds {
				wrong("re-entry answered %d holds at %s, want %d", re.Holds, stamp(o.ret), holds)
			}
			if re.ExpiresAt.After(rec.known) {
				rec.known = re.ExpiresAt
			}
		case unknown(o.status):
			sure = false
		case o.status == http.StatusConflict && o.code == "not_holder":
			gone(o, r)
			return
		}
	}
	if hd.renew {
		ttl := hd.ttl
		if hd.maxHold > 0 {
			ttl = capRenewal
		}
		o := w.op(opRenew, hd.lock, ttl, 0)
		o.fence = rec.fence
		l, r := c.renewAny(ctx, hd.limit, hd.lock, hd.g.Token, ttl)
		o = w.finish(o, r, l)
		rec.extends = append(rec.extends, o)
		switch {
		case o.status == http.StatusOK:
			rec.known = l.ExpiresAt
			leased("renew", o, l.ExpiresAt)
			capped("a renewal", o, l)
		case o.status == http.StatusConflict:
			gone(o, r)
			return
		case unknown(o.status):
			sure = false // renew's outcome does not change holds; kept for clarity
		}
	}
	if hd.resize {
		w.resizeLimits(ctx, c, hd, rec)
	}
	write()
	for i := range holds {
		hold := ids[len(ids)-1-i] // the inner holds first, the acquire's own last
		o := w.op(opRelease, hd.lock, 0, 0)
		o.fence = rec.fence
		rec.releaseCall = o.call
		var r result
		left := 0
		if hd.limit > 0 {
			r = c.releaseAny(ctx, hd.limit, hd.lock, hd.g.Token)
		} else {
			left, r = c.releaseHold(ctx, hd.lock, hd.g.Token, hold)
		}
		o = w.finish(o, r, grant{})
		switch {
		case o.status == http.StatusNoContent:
			rec.released, rec.freed = &o, o.ret
			if sure && i != holds-1 {
				wrong("release %d of %d answered 204 at %s: the lock freed with %d holds left", i+1, holds, stamp(o.ret), holds-1-i)
			}
			return
		case o.status == http.StatusOK:
			switch {
			case sure && left > holds-1-i: // an earlier release lost in a failover would say so
				rec.holdsWrong = append(rec.holdsWrong, fmt.Sprintf("%s: grant %d (%s): release %d of %d answered %d holds left at %s, want %d",
					hd.lock, rec.fence, w.prim, i+1, holds, left, stamp(o.ret), holds-1-i))
			case sure && left != holds-1-i:
				wrong("release %d of %d answered %d holds left at %s, want %d", i+1, holds, left, stamp(o.ret), holds-1-i)
			}
			rec.holdReleases = append(rec.holdReleases, o.ret)
		case o.status == http.StatusConflict:
			gone(o, r)
			return
		default:
			sure = false
		}
	}
}
