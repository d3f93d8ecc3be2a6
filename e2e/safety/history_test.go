package safety

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// opKind is what a recorded call did.
type opKind int

const (
	opAcquire opKind = iota
	opRenew
	opRelease
	opReenter // a POST with the holder's Lock-Token
	opPoll    // a ticket's poll
	opClose   // a ticket's DELETE
	opResize  // a semaphore's PUT .../limit, by a holder (fault matrix)
	opBreak   // an administrator's break (the fault matrix's breaker)
	// opSetAcquire is a lock set's acquire, recorded once per lock of the
	// set (the fault matrix's lock-set row).
	opSetAcquire
)

func (k opKind) String() string {
	return [...]string{"acquire", "renew", "release", "reenter", "poll", "close", "resize", "break", "set acquire"}[k]
}

// op is one call as a client saw it: when it was made and when its answer
// came, on the one clock the test and its gateways share.
type op struct {
	client int
	lock   string
	kind   opKind
	// fence is the grant's fencing token: the one a renew or release acts
	// for, or the one an acquire got.
	fence  int64
	status int           // 0: no answer (the outcome is unknown)
	wait   time.Duration // an acquire's wait_ms
	call   time.Time
	ret    time.Time
	// expires is the expires_at of a 201 or 200.
	expires time.Time
	// Set by the fault matrix (TestFaultMatrix): the primitive that made
	// the call, the lease it asked for, and the problem code of a refusal.
	prim string
	ttl  time.Duration
	code string
	// detail is a 503's problem detail: what the gateway knows of the
	// outcome (no answer in time, or an error from Redis).
	detail string
	// limit is the limit a semaphore's acquire sent, or a resize set.
	limit int
	// also are the other names one call acted on, recorded once per name
	// (a session's keep-alive or end): its answer is theirs too.
	also []string
	// minHold is the min_hold_ms an acquire sent (the minhold row).
	minHold time.Duration
	// priority is the priority a waiting set's acquire sent (the lockset
	// row; 0 also when it sent none).
	priority int
}

// names are every name o's call acted on.
func (o op) names() []string { return append([]string{o.lock}, o.also...) }

// grantRec is everything a client did with one grant.
type grantRec struct {
	lock     string
	fence    int64
	shared   bool // a shared (read) hold of a lock
	acquired op   // the 201
	// known is the latest expires_at the holder was told: until then the
	// grant is certainly live, unless released.
	known    time.Time
	released *op // a 204, if any
	// releaseCall is when a release was sent, whatever its answer: one
	// without an answer may have run.
	releaseCall time.Time
	writes      []grantWrite
	// endedEarly is a renew or release that said 409 before known.
	endedEarly *op
	// broken is a renew, re-entry or release that said 409 not_holder,
	// reason broken (the fault matrix's breaker): checked against the
	// breaks, not as endedEarly.
	broken *op
	// cut, when set, is the call of the first break that may have ended
	// the grant (see breakFindings): it was certainly held until then only.
	cut time.Time
	// Set by the fault matrix: the primitive, the calls that extended the
	// lease (re-entries, renews, whatever their answer), when a release
	// answered 204 (the grant certainly ended by then), and answers that
	// contradict what the grant's own calls said (holds counted wrong).
	prim    string
	extends []op
	freed   time.Time
	wrong   []string
	// holdsWrong are releases that said more holds were left than the
	// grant's own calls leave, and holdReleases when its earlier releases
	// of single holds answered: releases are not acknowledged by the
	// replicas, so a failover may lose one, and these count only when no
	// such release was answered around a failover (see faulty.trusted).
	holdsWrong   []string
	holdReleases []time.Time
}

// grantWrite is a write to the resource made while holding a grant.
type grantWrite struct {
	call, ret time.Time
	known     time.Time // the grant's known expiry when the write was made
	accepted  bool
}

// history is what every client of a run saw.
type history struct {
	mu     sync.Mutex
	ops    []op
	grants []*grantRec
	// notes are broken promises a client saw that belong to no grant it
	// holds (the fault matrix's idempotent retries).
	notes []finding
	// created counts the acquires that answered 201.
	created int
}

func (h *history) record(o op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, o)
	if o.kind == opAcquire && o.status == http.StatusCreated {
		h.created++
	}
}

// answeredSince says whether a call on lock answered after since.
func (h *history) answeredSince(lock string, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.ops) - 1; i >= 0; i-- {
		if h.ops[i].lock == lock && h.ops[i].ret.After(since) {
			return true
		}
	}
	return false
}

// acquired is the number of acquires that answered 201 so far.
func (h *history) acquired() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.created
}

// calls is the number of calls recorded so far.
func (h *history) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

func (h *history) addGrant(g *grantRec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants = append(h.grants, g)
}

// workload is a run of concurrent clients doing acquire / write / renew /
// write / release cycles on a few locks.
type workload struct {
	clients  []*client // worker i uses clients[i%len(clients)]
	workers  int
	locks    []string
	ttl      time.Duration
	wait     time.Duration
	duration time.Duration
	res      *resource
	// hold is how long a holder keeps working on the resource (a write
	// every holdStep, while the lease it knows of lasts) before it renews
	// or releases; 0: one write.
	hold time.Duration
	// limit, when positive, makes the locks semaphores of that limit:
	// clients take permits, and write to no resource (holders of a
	// semaphore write at once, in no fencing order).
	limit int
	// mixed makes about half the acquires ask for a shared hold of the
	// lock. Shared holders read: they write nothing to the resource.
	mixed bool
	// priorities, where the workload's runner supports it (faultyGateways
	// run), gives the waiting lock acquires of every other worker a
	// random priority (#39), so that the checks run with a reordered
	// queue; priority is the one cycle sends (0: none).
	priorities bool
	priority   int
	// enough, when set, runs the workload on past duration until the
	// history shows what the test needs, up to workloadStretch times
	// duration: a busy machine makes fewer grants in the same time.
	enough func(*history) bool
}

// workloadStretch bounds how far past its duration a workload with
// enough runs on.
const workloadStretch = 10

// holdStep is the work between two writes of a holder that holds.
const holdStep = 50 * time.Millisecond

// run runs the workload and returns its history.
func (w workload) run(t *testing.T) *history {
	t.Helper()
	h := &history{}
	ctx, cancel := context.WithTimeout(t.Context(), workloadStretch*w.duration+2*w.wait+time.Minute)
	defer cancel()
	start := time.Now()
	goOn := func() bool {
		switch since := time.Since(start); {
		case ctx.Err() != nil:
			return false
		case since < w.duration:
			return true
		case w.enough == nil || since >= workloadStretch*w.duration:
			return false
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return !w.enough(h)
	}
	var wg sync.WaitGroup
	for i := range w.workers {
		wg.Go(func() {
			c := w.clients[i%len(w.clients)]
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for goOn() {
				renew, shared := rng.IntN(2) == 0, w.mixed && rng.IntN(2) == 0
				w.cycle(ctx, h, c, i, w.locks[rng.IntN(len(w.locks))], w.ttl, w.wait, renew, shared)
			}
		})
	}
	wg.Wait()
	return h
}

// cycle is one attempt at a critical section (a shared one: a hold
// beside other shared ones), with a lease of ttl (also when renewed) and
// waiting at most wait for the lock.
func (w workload) cycle(ctx context.Context, h *history, c *client, id int, lock string, ttl, wait time.Duration, renew, shared bool) {
	o := op{client: id, lock: lock, kind: opAcquire, wait: wait, call: time.Now()}
	var g grant
	var r result
	if w.priority > 0 && w.limit == 0 {
		g, r = c.acquirePriority(ctx, lock, ttl, wait, shared, w.priority)
	} else if shared {
		g, r = c.acquireShared(ctx, lock, ttl, wait)
	} else {
		g, r = c.acquireAny(ctx, w.limit, lock, ttl, wait)
	}
	o.ret, o.status = time.Now(), r.status
	if r.err != nil && r.status == http.StatusCreated {
		o.status = 0 // a 201 we could not read: unknown
	}
	if o.status == http.StatusCreated {
		o.fence, o.expires = g.FencingToken, g.ExpiresAt
	}
	h.record(o)
	if o.status != http.StatusCreated {
		return
	}
	rec := &grantRec{lock: lock, fence: g.FencingToken, shared: shared, acquired: o, known: g.ExpiresAt}
	defer h.addGrant(rec)
	write := func() {
		if w.res == nil || shared {
			return
		}
		ww := grantWrite{call: time.Now(), known: rec.known}
		ww.accepted = w.res.write(lock, rec.fence)
		ww.ret = time.Now()
		rec.writes = append(rec.writes, ww)
	}
	write()
	for end := time.Now().Add(w.hold); time.Now().Before(end) && time.Now().Before(rec.known) && ctx.Err() == nil; {
		time.Sleep(holdStep) // the work, not synchronisation
		write()
	}
	if renew {
		o := op{client: id, lock: lock, kind: opRenew, fence: rec.fence, call: time.Now()}
		l, r := c.renewAny(ctx, w.limit, lock, g.Token, ttl)
		o.ret, o.status = time.Now(), r.status
		if r.err != nil {
			o.status = 0
		}
		h.record(o)
		switch o.status {
		case http.StatusOK:
			o.expires = l.ExpiresAt
			rec.known = l.ExpiresAt
		case http.StatusConflict:
			if o.ret.Before(rec.known) {
				rec.endedEarly = &o
			}
			return // not ours any more: stop writing
		default:
			// Unknown: keep to the lease we know of.
		}
	}
	write()
	o = op{client: id, lock: lock, kind: opRelease, fence: rec.fence, call: time.Now()}
	rec.releaseCall = o.call
	r = c.releaseAny(ctx, w.limit, lock, g.Token)
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0
	}
	h.record(o)
	switch o.status {
	case http.StatusNoContent:
		rec.released = &o
	case http.StatusConflict:
		if o.ret.Before(rec.known) {
			rec.endedEarly = &o
		}
	}
}

// end is until when the grant certainly held the lock: the release call
// (answered or not), or else the last expiry the holder was told of; or
// the call of a break that may have ended it (cut), if earlier.
func (g *grantRec) end() time.Time {
	end := g.known
	if !g.releaseCall.IsZero() && g.releaseCall.Before(end) {
		end = g.releaseCall
	}
	if !g.cut.IsZero() && g.cut.Before(end) {
		end = g.cut
	}
	return end
}

// findingKind is which promise a finding breaks.
type findingKind int

const (
	fenceRepeated findingKind = iota // a token granted twice
	endedEarly                       // a renew or release said 409 inside the known lease
	writeRefused                     // the resource refused a write made inside the lease
	fenceOrder                       // a grant before another in real time has a token not smaller
	overlap                          // two grants certainly held the lock at once
	staleAccepted                    // the resource accepted a token below one it had accepted
	tooMany                          // more grants of a semaphore certainly held it than its limit
	answerWrong                      // an answer contradicts what the grant's own calls said (fault matrix)
	heldByNobody                     // held (or refused) when no call could hold it (fault matrix)
)

// finding is one broken promise, with the grants involved: a alone, or a
// and b in the order of their tokens (none for staleAccepted).
type finding struct {
	kind findingKind
	lock string
	a, b *grantRec
	msg  string
	prim string // the fault matrix's primitive, for a finding without grants
	// unlessBroken: the finding stands only if no break of lock may have
	// run between from and to (see matrixFindings).
	unlessBroken bool
	from, to     time.Time
}

// check verifies the history and the resource's log against the promises.
// It returns the number of grants it checked.
func (h *history) check(t *testing.T, res *resource) int {
	t.Helper()
	return h.checkLimit(t, res, 1)
}

// checkLimit is check for semaphores of limit permits (1: locks): at no
// moment do more than limit grants of one name certainly hold it. res may
// be nil.
func (h *history) checkLimit(t *testing.T, res *resource, limit int) int {
	t.Helper()
	var errs []string
	for _, f := range h.findings(res, limit) {
		if len(errs) < 20 {
			errs = append(errs, f.msg)
		}
	}
	if len(errs) > 0 {
		t.Fatalf("the history breaks the promises:\n%s", strings.Join(errs, "\n"))
	}
	return len(h.grants)
}

// findings returns every way the history and the resource's log break the
// promises, for names of limit permits each (1: locks). res may be nil.
func (h *history) findings(res *resource, limit int) []finding {
	byLock := make(map[string][]*grantRec)
	for _, g := range h.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	var fs []finding
	add := func(kind findingKind, lock string, a, b *grantRec, format string, args ...any) {
		if a != nil && b != nil && b.fence < a.fence {
			a, b = b, a
		}
		fs = append(fs, finding{kind: kind, lock: lock, a: a, b: b, msg: fmt.Sprintf(format, args...)})
	}
	for lock, gs := range byLock {
		sort.Slice(gs, func(i, j int) bool { return gs[i].acquired.ret.Before(gs[j].acquired.ret) })
		fences := make(map[int64]*grantRec)
		for _, g := range gs {
			if first := fences[g.fence]; first != nil {
				add(fenceRepeated, lock, first, g, "%s: fencing token %d granted twice", lock, g.fence)
			}
			fences[g.fence] = g
			if g.endedEarly != nil {
				add(endedEarly, lock, g, nil, "%s: grant %d: %s answered %d at %s, before its expires_at %s",
					lock, g.fence, g.endedEarly.kind, g.endedEarly.status, stamp(g.endedEarly.ret), stamp(g.known))
			}
			for _, w := range g.writes {
				if !w.accepted && w.ret.Before(w.known) && (g.cut.IsZero() || w.ret.Before(g.cut)) {
					add(writeRefused, lock, g, nil, "%s: grant %d: the resource rejected a write made inside the lease (at %s, lease until %s): a later grant wrote during it",
						lock, g.fence, stamp(w.call), stamp(w.known))
				}
			}
		}
		for i, a := range gs {
			for _, b := range gs[i+1:] {
				// Real-time order: a grant received before another was
				// asked for must carry a smaller token.
				if a.acquired.ret.Before(b.acquired.call) && a.fence >= b.fence {
					add(fenceOrder, lock, a, b, "%s: grant %d was received at %s, before grant %d was asked for at %s, but its token is not smaller",
						lock, a.fence, stamp(a.acquired.ret), b.fence, stamp(b.acquired.call))
				}
				if b.acquired.ret.Before(a.acquired.call) && b.fence >= a.fence {
					add(fenceOrder, lock, a, b, "%s: grant %d precedes grant %d in real time, but its token is not smaller", lock, b.fence, a.fence)
				}
				// Mutual exclusion on the intervals each grant certainly
				// held the lock, unless both are shared holds.
				as, ae, bs, be := a.acquired.ret, a.end(), b.acquired.ret, b.end()
				if limit == 1 && !(a.shared && b.shared) && as.Before(ae) && bs.Before(be) && as.Before(be) && bs.Before(ae) {
					add(overlap, lock, a, b, "%s: grants %d [%s, %s] and %d [%s, %s] overlap", lock, a.fence, stamp(as), stamp(ae), b.fence, stamp(bs), stamp(be))
				}
			}
		}
		if limit > 1 {
			for _, over := range overLimit(gs, limit) {
				add(tooMany, lock, nil, nil, "%s: %s", lock, over)
			}
		}
	}
	if res == nil {
		res = newResource()
	}
	for _, w := range res.staleAccepted() {
		add(staleAccepted, w.lock, nil, nil, "%s: the resource accepted token %d at %s after a larger one", w.lock, w.fence, stamp(w.at))
	}
	return fs
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// lockState is the model's view of one lock: who holds it, and the
// largest fencing token handed out so far.
type lockState struct {
	held  bool
	fence int64
	max   int64
}

// lockModel is a lock as the API promises it, for porcupine. An acquire
// that answers 409 is legal in any state: a grant made for a waiter that
// then left is released by the gateway without any client seeing it, so
// the history cannot say the lock was free at that time.
var lockModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := make(map[string][]porcupine.Operation)
		var keys []string
		for _, o := range ops {
			l := o.Input.(op).lock
			if by[l] == nil {
				keys = append(keys, l)
			}
			by[l] = append(by[l], o)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return lockState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, st := state.(lockState), input.(op), output.(int)
		holds := s.held && s.fence == in.fence
		switch in.kind {
		case opAcquire:
			if st != http.StatusCreated {
				return true, s
			}
			if s.held || in.fence <= s.max {
				return false, s
			}
			return true, lockState{held: true, fence: in.fence, max: in.fence}
		case opRenew:
			return holds == (st == http.StatusOK), s
		case opRelease:
			if st == http.StatusNoContent {
				if !holds {
					return false, s
				}
				s.held = false
				return true, s
			}
			return !holds, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(op)
		return fmt.Sprintf("%s %s %d -> %d", in.kind, in.lock, in.fence, output.(int))
	},
}

// linearizable checks the history with porcupine. The model has no clock:
// it needs every call to have an answer and no lease to run out during the
// run, and logs why it skips the check otherwise.
func (h *history) linearizable(t *testing.T) {
	t.Helper()
	h.linearizableAgainst(t, lockModel)
}

// linearizableAgainst is linearizable with another model of the API.
func (h *history) linearizableAgainst(t *testing.T, model porcupine.Model) {
	t.Helper()
	var ops []porcupine.Operation
	var base time.Time
	for _, o := range h.ops {
		if base.IsZero() || o.call.Before(base) {
			base = o.call
		}
	}
	for _, o := range h.ops {
		if o.status == 0 || o.status >= 500 {
			t.Logf("porcupine: skipped, %s %s has an unknown outcome (%d)", o.kind, o.lock, o.status)
			return
		}
		ops = append(ops, porcupine.Operation{
			ClientId: o.client, Input: o, Output: o.status,
			Call: o.call.Sub(base).Nanoseconds(), Return: o.ret.Sub(base).Nanoseconds(),
		})
	}
	switch res := porcupine.CheckOperationsTimeout(model, ops, 30*time.Second); res {
	case porcupine.Illegal:
		t.Fatalf("porcupine: the history of %d calls is not linearizable", len(ops))
	case porcupine.Unknown:
		t.Logf("porcupine: no verdict within 30s on %d calls", len(ops))
	}
}
