package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
)

// The fault matrix's session row (TestFaultMatrix): a client opens a
// session, takes one or two of the round's locks in it (shared one time
// in four) and, one time in three, a permit of a round's semaphore, keeps
// the session alive while it works, releases some grants on their own, and
// then ends the session, or lets its lease run out. Its grants join the
// round's histories, so every check of the other rows holds them too (no
// overlap, fencing order, no stale write, the limit); their leases are the
// session's, which each keep-alive extends. Beyond those, the row checks
// what a session promises (P19):
//   - a keep-alive answered 200 that lists a grant as renewed says it was
//     live then, until the session's new expires_at; one that lists it
//     gone, while its lease certainly ran, needs a break that ended it;
//   - no acquire called after the session's end answered 200 is granted,
//     and no keep-alive then succeeds; an acquire that raced the end and
//     was granted counts as held only until the end was called;
//   - once the end answered 200 (and every acquire that raced it), none of
//     the session's grants is held past freeSlack; nor, when the session
//     was left to lapse, past the end of the last lease it may have had;
//   - an acquire answered 404 session_ended left nothing held.
//
// A grant is recognised in GET's holders by its owner label, unique to its
// acquire, so that acquires of unknown outcome are seen too.

// freeSlack is how long after a session's end (or its lease's) its locks
// may stay held: a second (P19), a Redis pause and the gateway's Redis
// timeout (matrixGatewayArgs).
const freeSlack = time.Second + 600*time.Millisecond + 500*time.Millisecond

// session is a 201 of POST /sessions.
type session struct {
	ID        string    `json:"session"`
	Token     string    `json:"session_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// sessionHold is one grant in a keep-alive's or an end's answer.
type sessionHold struct {
	Kind         string `json:"kind"`
	Resource     string `json:"resource"`
	FencingToken int64  `json:"fencing_token"`
	// ExpiresAt is a renewed grant's own lease: the session's, unless a
	// break's period shortened it.
	ExpiresAt time.Time `json:"expires_at"`
}

// sessionAnswer is the 200 of a keep-alive or an end.
type sessionAnswer struct {
	ExpiresAt time.Time     `json:"expires_at"`
	Renewed   []sessionHold `json:"renewed"`
	Gone      []sessionHold `json:"gone"`
	Released  []sessionHold `json:"released"`
}

func (c *client) openSession(ctx context.Context, ttl time.Duration) (session, result) {
	r := c.do(ctx, "POST", "/sessions", fmt.Sprintf(`{"ttl_ms":%d}`, ttl.Milliseconds()))
	var s session
	if r.status == http.StatusCreated && r.err == nil {
		if err := json.Unmarshal(r.body, &s); err != nil {
			r.err = err
		}
	}
	return s, r
}

// sessionCall is a keep-alive (PUT) or an end (DELETE) of s.
func (c *client) sessionCall(ctx context.Context, method string, s session) (sessionAnswer, result) {
	r := c.do(ctx, method, "/sessions/"+s.ID, "", "Session-Token", s.Token)
	var a sessionAnswer
	if r.status == http.StatusOK && r.err == nil {
		if err := json.Unmarshal(r.body, &a); err != nil {
			r.err = err
		}
	}
	return a, r
}

// acquireInSession takes a lock (shared or not) or, with sem, a permit of
// semLimit, in s, with the owner label.
func (c *client) acquireInSession(ctx context.Context, s session, name string, sem, shared bool, wait time.Duration, label string) (grant, result) {
	path := "/locks/" + name
	body := fmt.Sprintf(`{"wait_ms":%d,"owner":%q`, wait.Milliseconds(), label)
	switch {
	case sem:
		path = "/semaphores/" + name
		body += fmt.Sprintf(`,"limit":%d`, semLimit)
	case shared:
		body += `,"mode":"shared"`
	}
	r := c.do(ctx, "POST", path, body+"}", "Session-Token", s.Token)
	return decodeGrant(&r, http.StatusCreated), r
}

// holderLabels are the owner labels of a lock's holders; ok is false when
// the gateway did not answer 200 or 404.
func (c *client) holderLabels(ctx context.Context, lock string) (labels []string, ok bool) {
	r := c.do(ctx, "GET", "/locks/"+lock, "")
	switch r.status {
	case http.StatusNotFound:
		return nil, true
	case http.StatusOK:
		var info struct {
			Holders []struct {
				Owner string `json:"owner"`
			} `json:"holders"`
		}
		if json.Unmarshal(r.body, &info) != nil {
			return nil, false
		}
		for _, h := range info.Holders {
			labels = append(labels, h.Owner)
		}
		return labels, true
	}
	return nil, false
}

// sessGrant is one acquire of a session run, and the grant it made.
type sessGrant struct {
	name  string
	sem   bool
	label string
	h     *history
	got   op
	rec   *grantRec // when answered 201
	tok   string
	done  bool // released on its own (whatever the answer) or gone
	// racing: the acquire runs beside its session's end, which may end
	// its grant at any moment: no lease check (matrix_leases_test.go).
	racing bool
	shared bool
}

// leaseAnswer is a lease answered for g's grant, for the lease check.
func (g *sessGrant) leaseAnswer(what string, call, ret, expires time.Time) leaseAnswer {
	kind := exclusiveHold
	switch {
	case g.sem:
		kind = permitHold
	case g.shared:
		kind = sharedHold
	}
	return leaseAnswer{what: what, name: g.name, kind: kind, token: g.tok, fence: g.rec.fence, call: call, ret: ret, expires: expires}
}

// sessionRun is one session as its client saw it.
type sessionRun struct {
	w      *worker
	c      *client
	s      session
	ttl    time.Duration
	opened op
	grants []*sessGrant
	// lastEnd is when the session's lease ends at the latest, from what
	// each keep-alive that may have run says.
	lastEnd time.Time
}

// view is w recording into h.
func (w *worker) view(h *history) *worker {
	v := *w
	v.h = h
	return &v
}

func sessionCycle(ctx context.Context, w *worker, _ string) {
	rs := w.round
	ttl := time.Duration(1000+w.rng.IntN(1500)) * time.Millisecond
	c := w.client()
	o := w.op(opAcquire, "", ttl, 0)
	s, r := c.openSession(ctx, ttl)
	o.ret, o.status, o.code = time.Now(), r.status, r.code()
	if r.err != nil || r.status != http.StatusCreated {
		w.serverError("open", o, r)
		if r.status == 0 {
			time.Sleep(time.Duration(20+w.rng.IntN(30)) * time.Millisecond) // a client backs off
		}
		return
	}
	sr := &sessionRun{w: w, c: c, s: s, ttl: ttl, opened: o, lastEnd: o.ret.Add(ttl)}
	defer func() {
		for _, g := range sr.grants {
			if g.rec != nil {
				g.h.addGrant(g.rec)
			}
		}
	}()
	names := slices.Clone(rs.lockNames)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	n := 1 + w.rng.IntN(2) // one or two: six sessions at once must leave the lock sets room
	for _, name := range names[:n] {
		sr.acquire(ctx, name, false, w.rng.IntN(4) == 0)
	}
	if w.rng.IntN(3) == 0 {
		sr.acquire(ctx, rs.semNames[w.rng.IntN(len(rs.semNames))], true, false)
	}
	for range 1 + w.rng.IntN(3) { // the work, kept alive
		sr.write()
		time.Sleep(time.Duration(50+w.rng.IntN(int(ttl.Milliseconds())/3)) * time.Millisecond) // the work, not synchronisation
		sr.keep(ctx)
	}
	sr.write()
	for _, g := range sr.grants {
		if g.rec != nil && w.rng.IntN(3) == 0 {
			sr.releaseOne(ctx, g)
		}
	}
	if w.rng.IntN(4) == 0 {
		sr.lapse(ctx)
		return
	}
	var raced *sessGrant
	var wait chan struct{}
	if w.rng.IntN(4) == 0 { // an acquire that races the end
		if i := slices.IndexFunc(names, func(n string) bool {
			return !slices.ContainsFunc(sr.grants, func(g *sessGrant) bool { return g.name == n })
		}); i >= 0 {
			raced = &sessGrant{name: names[i], racing: true}
			v := w.view(w.h)
			v.rng = rand.New(rand.NewPCG(w.rng.Uint64(), 1)) // its own: it runs beside w
			shared, patience := w.rng.IntN(4) == 0, time.Duration(100+w.rng.IntN(400))*time.Millisecond
			wait = make(chan struct{})
			go func() {
				defer close(wait)
				sr.take(ctx, v, raced, shared, patience)
			}()
			time.Sleep(time.Duration(w.rng.IntN(50)) * time.Millisecond) // lets the acquire go out first, or not
		}
	}
	sr.end(ctx, raced, wait)
}

// serverError notes an answer of a session call that is a server error
// other than 503 backend_unavailable (matrixFindings does it for the
// calls on names).
func (w *worker) serverError(what string, o op, r result) {
	if o.status >= 500 && (o.status != http.StatusServiceUnavailable || o.code != "backend_unavailable") {
		w.round.note(finding{kind: answerWrong, prim: w.prim, msg: fmt.Sprintf("session %s called at %s answered %s: a server error other than 503 backend_unavailable", what, stamp(o.call), r)}, false)
	}
}

// acquire takes name in the session, waiting a little.
func (sr *sessionRun) acquire(ctx context.Context, name string, sem, shared bool) {
	g := &sessGrant{name: name}
	sr.grants = append(sr.grants, g)
	wait := time.Duration(0)
	if sr.w.rng.IntN(2) == 0 {
		wait = time.Duration(50+sr.w.rng.IntN(500)) * time.Millisecond
	}
	g.sem = sem
	sr.take(ctx, sr.w, g, shared, wait)
}

// take makes g's acquire, as w, and records it.
func (sr *sessionRun) take(ctx context.Context, w *worker, g *sessGrant, shared bool, wait time.Duration) {
	g.h = w.round.locks
	if g.sem {
		g.h = w.round.sems
	}
	g.label = fmt.Sprintf("s%d-%d", w.id, w.rng.Uint64())
	g.shared = shared
	c := sr.c
	o := w.op(opAcquire, g.name, sr.ttl, wait)
	if g.sem {
		o.limit = semLimit
	}
	gr, r := c.acquireInSession(ctx, sr.s, g.name, g.sem, shared, wait, g.label)
	g.got = w.view(g.h).finish(o, r, gr)
	switch {
	case g.got.status == http.StatusCreated:
		g.tok = gr.Token
		g.rec = &grantRec{lock: g.name, fence: gr.FencingToken, shared: shared, acquired: g.got, known: gr.ExpiresAt, prim: w.prim}
		if !g.racing {
			w.checkLease(ctx, g.leaseAnswer("acquire", g.got.call, g.got.ret, gr.ExpiresAt))
		}
	case g.got.code == "session_ended" && !g.sem:
		// The acquire released what it took before it answered.
		if labels, ok := c.holderLabels(ctx, g.name); ok && slices.Contains(labels, g.label) {
			w.round.note(finding{kind: heldByNobody, lock: g.name, prim: w.prim, from: g.got.call, to: time.Now(), msg: fmt.Sprintf(
				"%s: an acquire in a session called at %s answered 404 session_ended at %s, and its grant (owner %s) still held the lock after that answer",
				g.name, stamp(g.got.call), stamp(g.got.ret), g.label)}, true)
		}
	}
}

// live are the acquires of the session that may hold a grant now.
func (sr *sessionRun) live() []*sessGrant {
	var gs []*sessGrant
	for _, g := range sr.grants {
		if !g.done && (g.rec != nil || unknown(g.got.status)) {
			gs = append(gs, g)
		}
	}
	return gs
}

// write writes to the resource with each exclusive lock the session holds.
func (sr *sessionRun) write() {
	for _, g := range sr.live() {
		if g.rec == nil || g.rec.shared || g.sem {
			continue
		}
		ww := grantWrite{call: time.Now(), known: g.rec.known}
		ww.accepted = sr.w.res.write(g.name, g.rec.fence)
		ww.ret = time.Now()
		g.rec.writes = append(g.rec.writes, ww)
	}
}

// keep keeps the session alive. Each grant it may renew gets a renew call
// in its history (the lease it may have made), with the keep-alive's
// answer for that grant: 200 when listed as renewed.
func (sr *sessionRun) keep(ctx context.Context) {
	w, live := sr.w, sr.live()
	call := time.Now()
	a, r := sr.c.sessionCall(ctx, "PUT", sr.s)
	ret := time.Now()
	status := r.status
	if r.err != nil {
		status = 0
	}
	o := op{client: w.id, kind: opRenew, prim: w.prim, ttl: sr.ttl, call: call, ret: ret, status: status, code: r.code(), detail: r.detailOf(status)}
	w.serverError("keep-alive", o, r)
	switch {
	case status == http.StatusOK:
		sr.lastEnd = maxTime(sr.lastEnd, a.ExpiresAt)
	case unknown(status):
		sr.lastEnd = maxTime(sr.lastEnd, ret.Add(sr.ttl))
	}
	var names []string
	for _, g := range live {
		names = append(names, g.name)
	}
	for _, g := range live {
		e := o
		e.lock, e.also = g.name, othersThan(names, g.name)
		if g.rec != nil {
			e.fence = g.rec.fence
		}
		if status == http.StatusOK {
			at := func(hs []sessionHold) int {
				return slices.IndexFunc(hs, func(h sessionHold) bool { return h.Resource == g.name && (h.Kind == "semaphore") == g.sem })
			}
			listed := func(hs []sessionHold) bool { return at(hs) >= 0 }
			switch {
			case listed(a.Renewed):
				ends := a.Renewed[at(a.Renewed)].ExpiresAt // the grant's own lease
				if ends.IsZero() {
					ends = a.ExpiresAt
				}
				e.expires = ends
				if g.rec != nil && ends.After(g.rec.known) {
					g.rec.known = ends
				}
				if g.rec != nil {
					w.checkLease(ctx, g.leaseAnswer("keep-alive", call, ret, ends))
				}
			case listed(a.Gone) && g.rec != nil:
				e.status = http.StatusConflict
				g.done = true
				if ret.Before(g.rec.known) {
					// A break may end the grant from its making, which
					// is before its 201 (the acquire confirms its place
					// in the session after the grant): from its call.
					w.round.note(finding{kind: answerWrong, lock: g.name, prim: w.prim, unlessBroken: true, from: g.rec.acquired.call, to: ret, msg: fmt.Sprintf(
						"%s: grant %d (session): a keep-alive answered at %s listed it gone, within the lease it was last told (until %s)",
						g.name, g.rec.fence, stamp(ret), stamp(g.rec.known))}, true)
				}
			default:
				e.status = http.StatusConflict // not renewed
			}
		}
		g.h.record(e)
		if g.rec != nil && (e.status == http.StatusOK || unknown(e.status)) {
			g.rec.extends = append(g.rec.extends, e)
		}
	}
	if status == 0 {
		time.Sleep(time.Duration(20+w.rng.IntN(30)) * time.Millisecond) // a client backs off
	}
}

// releaseOne releases g's grant with its own token, outside the session.
func (sr *sessionRun) releaseOne(ctx context.Context, g *sessGrant) {
	w := sr.w
	o := w.op(opRelease, g.name, 0, 0)
	o.fence = g.rec.fence
	g.rec.releaseCall = o.call
	g.done = true
	var r result
	if g.sem {
		r = sr.c.releaseAny(ctx, semLimit, g.name, g.tok)
	} else {
		r = sr.c.release(ctx, g.name, g.tok)
	}
	o = w.view(g.h).finish(o, r, grant{})
	switch {
	case o.status == http.StatusNoContent:
		g.rec.released, g.rec.freed = &o, o.ret
	case o.status == http.StatusConflict && r.reason() == "broken":
		g.rec.broken = &o
	case o.status == http.StatusConflict && o.ret.Before(g.rec.known):
		g.rec.endedEarly = &o
	}
}

// end ends the session, and checks what it left: nothing granted after
// it, and its locks free within freeSlack. raced, when set, is an acquire
// that raced it, done when wait closes.
func (sr *sessionRun) end(ctx context.Context, raced *sessGrant, wait chan struct{}) {
	w := sr.w
	call := time.Now()
	a, r := sr.c.sessionCall(ctx, "DELETE", sr.s)
	ret := time.Now()
	status := r.status
	if r.err != nil {
		status = 0
	}
	o := op{client: w.id, kind: opRelease, prim: w.prim, call: call, ret: ret, status: status, code: r.code(), detail: r.detailOf(status)}
	w.serverError("end", o, r)
	if wait != nil {
		<-wait
		sr.grants = append(sr.grants, raced)
	}
	if status == 0 || status == http.StatusOK || status >= 500 {
		for _, g := range sr.live() {
			if g.rec == nil {
				continue
			}
			// The end may release the grant at any time from its call.
			if g.rec.releaseCall.IsZero() || call.Before(g.rec.releaseCall) {
				g.rec.releaseCall = call
			}
			if status != http.StatusOK {
				continue
			}
			if g.rec.acquired.call.After(ret) {
				w.round.note(finding{kind: answerWrong, lock: g.name, prim: w.prim, from: call, to: g.rec.acquired.ret, msg: fmt.Sprintf(
					"%s: grant %d (session): an acquire called at %s answered 201 at %s, after its session's end answered 200 at %s",
					g.name, g.rec.fence, stamp(g.rec.acquired.call), stamp(g.rec.acquired.ret), stamp(ret))}, true) // a failover may lose the end
			}
			e := o
			e.lock, e.fence, e.status = g.name, g.rec.fence, http.StatusNoContent
			if slices.ContainsFunc(a.Released, func(h sessionHold) bool { return h.Resource == g.name && (h.Kind == "semaphore") == g.sem }) {
				g.rec.released = &e
			}
			g.rec.freed = ret // ended by the end's answer, whether it released it or it had ended
		}
	}
	if status != http.StatusOK {
		return
	}
	// Nothing joins an ended session.
	if w.rng.IntN(3) == 0 {
		probe := &sessGrant{name: sr.w.round.lockNames[w.rng.IntN(len(sr.w.round.lockNames))], racing: true} // a 201 is the finding
		sr.take(ctx, w, probe, false, 0)
		if probe.rec != nil {
			w.round.note(finding{kind: answerWrong, lock: probe.name, prim: w.prim, from: call, to: probe.got.ret, msg: fmt.Sprintf(
				"%s: an acquire in a session called at %s answered 201 (grant %d) at %s, after the session's end answered 200 at %s",
				probe.name, stamp(probe.got.call), probe.rec.fence, stamp(probe.got.ret), stamp(ret))}, true)
			sr.c.release(ctx, probe.name, probe.tok)
		}
	}
	if w.rng.IntN(3) == 0 {
		kc := time.Now()
		if _, r := sr.c.sessionCall(ctx, "PUT", sr.s); r.status == http.StatusOK {
			w.round.note(finding{kind: answerWrong, prim: w.prim, from: call, to: time.Now(), msg: fmt.Sprintf(
				"a keep-alive of a session called at %s answered 200, after the session's end answered 200 at %s", stamp(kc), stamp(ret))}, true)
		}
	}
	from := ret
	for _, g := range sr.grants {
		if !unknown(g.got.status) {
			from = maxTime(from, g.got.ret)
		}
	}
	sr.freed(ctx, from, func(g *sessGrant) bool { return !unknown(g.got.status) }, "its end answered 200")
}

// lapse lets the session's lease run out, and checks that its locks are
// free within freeSlack of the last lease it may have had.
func (sr *sessionRun) lapse(ctx context.Context) {
	until := sr.lastEnd.Add(50 * time.Millisecond) // a grant's lease may outrun its session's (leaseSlack)
	for _, g := range sr.live() {
		if g.rec != nil && (g.rec.releaseCall.IsZero() || until.Before(g.rec.releaseCall)) {
			g.rec.releaseCall = until // not ours past it: the client stops there
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(until)): // the lease's end, which the check is about
	}
	sr.freed(ctx, until, func(*sessGrant) bool { return true }, "its lease ran out")
}

// freed polls the session's locks from the time from: a GET called after
// from+freeSlack must show none of the grants of the acquires that count.
func (sr *sessionRun) freed(ctx context.Context, from time.Time, counts func(*sessGrant) bool, why string) {
	w := sr.w
	deadline, giveUp := from.Add(freeSlack), from.Add(freeSlack+3*time.Second)
	for _, g := range sr.grants {
		if g.sem || !counts(g) {
			continue
		}
		for ctx.Err() == nil && time.Now().Before(giveUp) {
			call := time.Now()
			labels, ok := sr.c.holderLabels(ctx, g.name)
			if ok && !slices.Contains(labels, g.label) {
				break
			}
			if ok && call.After(deadline) {
				w.round.note(finding{kind: heldByNobody, lock: g.name, prim: w.prim, from: sr.opened.call, to: call, msg: fmt.Sprintf(
					"%s: the session's grant of the acquire called at %s (owner %s, answered %d) still held the lock at %s, past %v after %s at %s",
					g.name, stamp(g.got.call), g.label, g.got.status, stamp(call), freeSlack, why, stamp(from))}, true)
				break
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
