package embedded

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// Backend is the embedded backend: locks live in this process only. It has the
// same semantics as the Redis backend, so a single gateway needs no Redis,
// but it cannot share locks between processes.
type Backend struct {
	opts  Options
	mu    sync.Mutex
	locks map[locks.Key]*memLock
	// held names the locks of each namespace that are in locks, so that a
	// listing looks at its own namespace only.
	held      map[string]map[string]struct{}
	queues    map[locks.Key][]*memWaiter // FIFO; a lock with waiters is never free
	sems      map[locks.Key]*memSemaphore
	lastFence int64
	idem      memIdem // records of idempotency keys (idempotency_memory.go)
	// delayed holds, for a lock whose lease ended unreleased, when the lock
	// delay after it ends.
	delayed map[locks.Key]time.Time
	// resting holds, for a lock whose grant was released inside its min
	// hold (AcquireRequest.MinHold), when that ends: delayed keeps it
	// from new holders until then too, and Inspect says so.
	resting map[locks.Key]time.Time
	// records remember grants by token hash, until RecordTTL after their
	// lease or release (see Reason); pruneAt is the size at which the next
	// grant sweeps out the forgotten ones. A busy gateway remembers a
	// minute of grants, hundreds of thousands: neither key nor value holds
	// a pointer, so the garbage collector never scans them.
	records map[tokenSum]memRecord
	pruneAt int
	// histories are the locks' histories (see Historian); forgotten is
	// the highest index of those forgotten, below which no history begins.
	histories map[locks.Key]*memHistory
	forgotten int64
	// tickets are the tickets by id (ticket_memory.go).
	tickets map[string]*memTicket
	*locks.SessionEngine
	*locks.SetEngine
	// watched are closed, and dropped, at the next event of their lock:
	// its watchers look again (see Watch); semWatched at the next change
	// of their semaphore (see WatchSemaphore). semForgotten is the highest
	// index of the semaphores forgotten.
	watched      map[locks.Key]chan struct{}
	semWatched   map[locks.Key]chan struct{}
	semForgotten int64
}

// Options configures the embedded backend. The zero value is usable.
type Options struct {
	// LockDelay is as RedisOptions.LockDelay.
	LockDelay time.Duration
	// History is as RedisOptions.History.
	History int
	// TicketLiveness is as RedisOptions.TicketLiveness.
	TicketLiveness time.Duration
	// MaxSharedHolders is as RedisOptions.MaxSharedHolders.
	MaxSharedHolders int
	// SessionMaxHolds is as RedisOptions.SessionMaxHolds.
	SessionMaxHolds int
	// SessionsPerSubject is as the Redis backend's Options.SessionsPerSubject.
	SessionsPerSubject int
	// PriorityAging is as the Redis backend's Options.PriorityAging.
	PriorityAging time.Duration
}

// memRecord is what the backend remembers of a grant.
type memRecord struct {
	released bool
	broken   bool  // ended by a break (see Breaker)
	until    int64 // when it is forgotten, ns since 1970
}

// tokenSum is the SHA-256 of an owner token: what the embedded backend
// keeps of it, as the Redis backend keeps its tokenHash. An array, so a
// map keyed by it holds no pointer and costs no allocation to look up.
type tokenSum [sha256.Size]byte

func sumOf(token string) tokenSum { return sha256.Sum256([]byte(token)) }

var _ locks.Backend = (*Backend)(nil)

// memLock is a held lock: one exclusive grant, or any number of shared
// ones.
type memLock struct {
	mode    locks.Mode
	holders map[tokenSum]*memGrant
}

// until is when the last lease of l ends: when l is free at the latest.
func (l *memLock) until() time.Time {
	var last time.Time
	for _, g := range l.holders {
		if g.expiresAt.After(last) {
			last = g.expiresAt
		}
	}
	return last
}

// soonest is when the first lease of l ends.
func (l *memLock) soonest() time.Time {
	var first time.Time
	for _, g := range l.holders {
		if first.IsZero() || g.expiresAt.Before(first) {
			first = g.expiresAt
		}
	}
	return first
}

// sharedFull reports whether l, held shared, has the most shared holders
// it may have: another waits, or is refused.
func (m *Backend) sharedFull(l *memLock) bool {
	return l.mode == locks.Shared && len(l.holders) >= m.opts.MaxSharedHolders
}

// memGrant is one holder of one lock.
type memGrant struct {
	tokenSum   tokenSum
	fence      int64
	subject    string
	owner      string
	acquiredAt time.Time
	ttl        time.Duration // as acquired: what a renew without a TTL restores
	expiresAt  time.Time
	expiry     *time.Timer // ends the grant at expiresAt
	holds      []string    // the ids of its holds (see Grant.Hold); nil: BaseHold alone
	value      string      // see AcquireRequest.Value

	// breakBy, when set, is who breaks the grant with a period (see
	// Breaker): it ends broken at breakEnd, which its lease never passes.
	breakBy  string
	breakEnd time.Time

	// holdEnd, when set, is the grant's hard cap (AcquireRequest.MaxHold):
	// its lease never passes it, and ends max_hold there.
	holdEnd time.Time

	// idem is the record of its idempotency key, if any.
	idem *memIdemRecord

	// minHold is until when its release keeps the lock from others
	// (AcquireRequest.MinHold); zero for none.
	minHold time.Time
}

// memWaiter is a caller waiting in a lock's queue.
type memWaiter struct {
	token  string
	req    locks.AcquireRequest
	handed chan locks.Grant // receives the grant when the lock is handed over
	grant  *locks.Grant     // set, under mu, when handed over
	ticket *memTicket       // set for a ticket's entry (ticket_memory.go)
	// rank is its place in a lock's queue: when it arrived, less its
	// head start (see rankOf). A waiter that queues again keeps it.
	rank time.Time
}

// rankOf is the rank of a waiter with req that arrives at now: a waiter of
// priority p ranks as one of priority 0 that came p agings earlier (as
// the Redis backend's queue scores its waiters, lua/lib_queue.lua enqueue).
func (m *Backend) rankOf(req locks.AcquireRequest, now time.Time) time.Time {
	return now.Add(-time.Duration(req.Priority) * m.opts.PriorityAging)
}

// enqueueLocked puts w in key's queue by its rank (see byRank). m.mu
// must be held.
func (m *Backend) enqueueLocked(key locks.Key, w *memWaiter) {
	m.queues[key] = byRank(m.queues[key], w)
}

// byRank returns queue q with w in its place by rank: after every waiter
// of an earlier or the same rank, so that equals are served in arrival
// order.
func byRank(q []*memWaiter, w *memWaiter) []*memWaiter {
	i := len(q)
	for i > 0 && q[i-1].rank.After(w.rank) {
		i--
	}
	return slices.Insert(q, i, w)
}

// New returns an empty embedded backend.
func New(opts Options) *Backend {
	if opts.MaxSharedHolders <= 0 {
		opts.MaxSharedHolders = locks.DefaultMaxSharedHolders
	}
	if opts.SessionMaxHolds <= 0 {
		opts.SessionMaxHolds = locks.DefaultSessionMaxHolds
	}
	if opts.SessionsPerSubject <= 0 {
		opts.SessionsPerSubject = locks.DefaultSessionsPerSubject
	}
	if opts.PriorityAging <= 0 {
		opts.PriorityAging = locks.DefaultPriorityAging
	}
	m := &Backend{opts: opts, locks: make(map[locks.Key]*memLock), held: make(map[string]map[string]struct{}), queues: make(map[locks.Key][]*memWaiter),
		sems: make(map[locks.Key]*memSemaphore), delayed: make(map[locks.Key]time.Time), resting: make(map[locks.Key]time.Time), records: make(map[tokenSum]memRecord),
		histories: make(map[locks.Key]*memHistory), watched: make(map[locks.Key]chan struct{}),
		semWatched: make(map[locks.Key]chan struct{})}
	m.SessionEngine = &locks.SessionEngine{Store: &memSessions{}, Grants: m, MaxHolds: opts.SessionMaxHolds,
		Counter: &memSessionCount{}, MaxPerSubject: opts.SessionsPerSubject}
	m.SetEngine = &locks.SetEngine{Grants: m, All: m}
	return m
}

// noteLocked remembers g, as held until its lease ends, or released now.
// m.mu must be held.
func (m *Backend) noteLocked(g *memGrant, released bool, now time.Time) {
	until := g.expiresAt
	if released {
		until = now
	}
	m.records[g.tokenSum] = memRecord{released: released, broken: !released && g.breakBy != "", until: until.Add(locks.RecordTTL).UnixNano()}
}

// whyLocked says why token holds nothing. m.mu must be held.
func (m *Backend) whyLocked(token string, now time.Time) locks.Reason {
	rec, ok := m.records[sumOf(token)]
	switch {
	case !ok || now.UnixNano() >= rec.until:
		return locks.ReasonUnknown
	case rec.released:
		return locks.ReasonReleased
	case rec.broken:
		return locks.ReasonBroken
	}
	return locks.ReasonExpired
}

// pruneLocked forgets the records past their time, when there are twice
// as many as after the last sweep: amortised, a grant pays for one.
// m.mu must be held.
func (m *Backend) pruneLocked(now time.Time) {
	if len(m.records) < m.pruneAt {
		return
	}
	for h, rec := range m.records {
		if now.UnixNano() >= rec.until {
			delete(m.records, h)
		}
	}
	m.pruneHistoriesLocked(now)
	m.pruneSemaphoresLocked(now)
	for id, tk := range m.tickets { // handed a grant that ended unpolled
		if tk.w.grant != nil && m.liveGrantLocked(tk) == nil {
			delete(m.tickets, id)
		}
	}
	m.pruneAt = max(2*len(m.records), 1024)
}

// delayedLocked reports whether the lock delay keeps the free lock key
// from new holders, and until when. m.mu must be held.
func (m *Backend) delayedLocked(key locks.Key, now time.Time) (time.Time, bool) {
	until, ok := m.delayed[key]
	if ok && !now.Before(until) {
		delete(m.delayed, key)
		ok = false
	}
	return until, ok
}

// Acquire implements Locker.
func (m *Backend) Acquire(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	return m.await(ctx, memLocks{m}, key, req)
}

// memQueue is what callers of the embedded backend wait for: a lock
// (memLocks) or a semaphore's permit (memPermits). await is the one wait
// loop of both.
type memQueue interface {
	// try grants w at once, queues it (queued), or refuses it (err).
	try(key locks.Key, w *memWaiter) (g locks.Grant, queued bool, err error)
	// leave takes w out of the queue; if a grant was handed to w first,
	// it returns it (handed).
	leave(key locks.Key, w *memWaiter) (g locks.Grant, handed bool)
	// refusal is the error of a wait that ran out.
	refusal(key locks.Key) error
	// release ends a grant nobody will receive.
	release(ctx context.Context, key locks.Key, token string)
	// what names the resource in errors: "" for a lock, "semaphore ".
	what() string
}

// await asks q for a grant of key, and waits up to req.Wait for one to be
// handed over.
func (m *Backend) await(ctx context.Context, q memQueue, key locks.Key, req locks.AcquireRequest) (locks.Grant, error) {
	token := req.OwnerToken
	if token == "" {
		token = locks.NewToken()
	}
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	rank := m.rankOf(req, time.Now())
	for {
		w := &memWaiter{token: token, req: req, handed: make(chan locks.Grant, 1), rank: rank}
		g, queued, err := q.try(key, w)
		if err != nil {
			return locks.Grant{}, err
		}
		if !queued {
			return deliver(ctx, q, key, g, req.Keep)
		}
		select {
		case g := <-w.handed:
			if g = handedOver(g); g.TTL > 0 {
				return deliver(ctx, q, key, g, req.Keep)
			}
			// The lease ran out before this goroutine ran: never hand out a
			// dead lease; queue again.
		case <-deadline.C:
			if g, handed := q.leave(key, w); handed {
				if g = handedOver(g); g.TTL > 0 {
					return deliver(ctx, q, key, g, req.Keep) // handed over as the wait ran out
				}
			}
			return locks.Grant{}, q.refusal(key)
		case <-ctx.Done():
			if g, handed := q.leave(key, w); handed {
				q.release(context.WithoutCancel(ctx), key, g.Token)
			}
			return locks.Grant{}, fmt.Errorf("acquire %s%s: %w", q.what(), key, ctx.Err())
		}
	}
}

// handedOver describes a grant handed to a waiter as it stands now: its
// TTL is what remains of the lease, as the Redis backend reports it.
func handedOver(g locks.Grant) locks.Grant {
	now := time.Now()
	g.HandoffDelay = now.Sub(g.ExpiresAt.Add(-g.TTL))
	g.TTL = g.ExpiresAt.Sub(now)
	return g
}

// deliver hands g to the caller, unless the caller has left: then nobody
// would ever release it, so it is released at once; with keep (a call with
// an idempotency key) it is handed over even so, for the retry the key's
// record leads to it.
func deliver(ctx context.Context, q memQueue, key locks.Key, g locks.Grant, keep bool) (locks.Grant, error) {
	if ctx.Err() != nil && !keep {
		q.release(context.WithoutCancel(ctx), key, g.Token)
		return locks.Grant{}, fmt.Errorf("acquire %s%s: %w", q.what(), key, ctx.Err())
	}
	return g, nil
}

// memLocks is the memQueue of locks.
type memLocks struct{ m *Backend }

func (q memLocks) try(key locks.Key, w *memWaiter) (locks.Grant, bool, error) {
	g, held, queued := q.m.tryAcquire(key, w)
	if held != nil {
		return locks.Grant{}, false, held
	}
	return g, queued, nil
}

func (q memLocks) leave(key locks.Key, w *memWaiter) (locks.Grant, bool) { return q.m.leave(key, w) }
func (q memLocks) refusal(key locks.Key) error                           { _, err := q.m.heldError(key); return err }
func (q memLocks) release(ctx context.Context, key locks.Key, token string) {
	q.m.Release(ctx, key, token)
}
func (memLocks) what() string { return "" }

// tryAcquire grants the lock to w if it is free (and not kept by the lock
// delay), or if both it and w are shared, nobody waits and the lock has
// room for another shared holder. Otherwise a waiting w joins the queue
// (queued), and one that does not wait gets why it was refused (held).
func (m *Backend) tryAcquire(key locks.Key, w *memWaiter) (g locks.Grant, held *locks.HeldError, queued bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	l := m.locks[key]
	delayedUntil, delayed := m.delayedLocked(key, now)
	if l == nil && !delayed {
		// A lock delay may have ended before its timer ran to hand the
		// lock on: those who queued during it go first.
		m.handOnLocked(key, now)
		l = m.locks[key]
	}
	joins := l != nil && l.mode == locks.Shared && w.req.Mode == locks.Shared
	if joins && w.req.Wait == 0 && m.sharedFull(l) {
		return locks.Grant{}, &locks.HeldError{RetryAfter: l.soonest().Sub(now), SharedFull: m.opts.MaxSharedHolders}, false
	}
	if l == nil && !delayed || joins && !m.sharedFull(l) && len(m.queues[key]) == 0 {
		return m.grantLocked(key, w, now, "acquired"), nil, false
	}
	if w.req.Wait > 0 {
		m.enqueueLocked(key, w)
		return locks.Grant{}, nil, true
	}
	if l == nil {
		held := &locks.HeldError{RetryAfter: delayedUntil.Sub(now)}
		if _, held.MinHold = m.restingLocked(key, now); held.MinHold {
			held.FreeAt = delayedUntil.UTC()
		}
		return locks.Grant{}, held, false
	}
	return locks.Grant{}, &locks.HeldError{RetryAfter: l.until().Sub(now)}, false
}

// grantLocked makes w a holder of key, which is free, or held shared when w
// asks for a shared hold. m.mu must be held.
func (m *Backend) grantLocked(key locks.Key, w *memWaiter, now time.Time, event string) locks.Grant {
	l := m.locks[key]
	if l == nil {
		l = &memLock{mode: w.req.Mode, holders: make(map[tokenSum]*memGrant, 1)}
		m.locks[key] = l
		if m.held[key.Namespace] == nil {
			m.held[key.Namespace] = make(map[string]struct{})
		}
		m.held[key.Namespace][key.Name] = struct{}{}
	}
	g := m.newGrantLocked(w, now, func() { m.expireLocked(key, time.Now()) })
	l.holders[g.tokenSum] = g
	m.eventLocked(key, event, now, g)
	return g.grant(w.token)
}

// newGrantLocked makes a grant for w, whose lease calls expire, under
// m.mu, when it runs out. m.mu must be held.
func (m *Backend) newGrantLocked(w *memWaiter, now time.Time, expire func()) *memGrant {
	g := &memGrant{
		tokenSum:   sumOf(w.token),
		fence:      m.nextFence(now),
		subject:    w.req.Subject,
		owner:      w.req.Owner,
		acquiredAt: now,
		ttl:        w.req.TTL,
		expiresAt:  now.Add(w.req.TTL),
		value:      w.req.Value,
	}
	if w.req.MaxHold > 0 {
		g.holdEnd = now.Add(w.req.MaxHold)
	}
	if w.req.MinHold > 0 {
		g.minHold = now.Add(w.req.MinHold)
	}
	g.expiry = time.AfterFunc(w.req.TTL, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		expire()
	})
	m.pruneLocked(now)
	m.noteLocked(g, false, now)
	return g
}

// grant describes g to its holder.
func (g *memGrant) grant(token string) locks.Grant {
	return locks.Grant{Token: token, Holds: g.holdCount(), Lease: g.lease(g.ttl)}
}

// lease describes g's lease, ttl long, to its holder.
func (g *memGrant) lease(ttl time.Duration) locks.Lease {
	return locks.Lease{FencingToken: g.fence, TTL: ttl, ExpiresAt: g.expiresAt, HoldUntil: g.holdEnd}
}

// nextFence keeps fencing tokens increasing across restarts: a new process
// starts from the wall clock in microseconds, which is past every token an
// earlier process handed out unless it granted more than one lock per
// microsecond on average, or the clock went back.
func (m *Backend) nextFence(now time.Time) int64 {
	m.lastFence = max(m.lastFence+1, now.UnixMicro())
	return m.lastFence
}

// expireLocked ends the grants of key whose lease has run out, and hands
// the lock on. A timer that fires just before a renewal finds a later
// expiry and does nothing. m.mu must be held.
func (m *Backend) expireLocked(key locks.Key, now time.Time) {
	l := m.locks[key]
	if l == nil {
		return
	}
	ended := false
	for h, g := range l.holders {
		if !now.Before(g.expiresAt) {
			g.expiry.Stop()
			delete(l.holders, h)
			ended = true
			if g.breakBy != "" { // its break period ended it: no lock delay, its holder knew
				m.recordLocked(key, locks.Event{Kind: "broken", At: g.expiresAt.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence, By: g.breakBy})
				continue
			}
			if !g.holdEnd.IsZero() && !g.expiresAt.Before(g.holdEnd) {
				m.eventLocked(key, "max_hold", g.expiresAt, g)
			} else {
				m.eventLocked(key, "expired", g.expiresAt, g)
			}
			m.delayLocked(key, g.expiresAt.Add(m.opts.LockDelay), now)
		}
	}
	if ended {
		m.freedLocked(key, l, now)
	}
}

// delayLocked keeps key from new holders until until, when the lock delay
// is on (a holder's lease ended unreleased), and hands the lock on then.
// m.mu must be held.
func (m *Backend) delayLocked(key locks.Key, until, now time.Time) {
	if m.opts.LockDelay <= 0 || !now.Before(until) || !until.After(m.delayed[key]) {
		return
	}
	m.delayed[key] = until
	time.AfterFunc(until.Sub(now), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.handOnLocked(key, time.Now())
	})
}

// endLocked releases g, a holder of key, and hands the lock on. m.mu must
// be held.
func (m *Backend) endLocked(key locks.Key, g *memGrant, now time.Time, session string) {
	g.expiry.Stop()
	m.noteLocked(g, true, now)
	m.recordLocked(key, locks.Event{Kind: "released", At: now.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence, Session: session})
	l := m.locks[key]
	delete(l.holders, g.tokenSum)
	if now.Before(g.minHold) {
		m.restLocked(key, g.minHold, now)
	}
	m.freedLocked(key, l, now)
}

// restLocked keeps key, whose grant was released inside its min hold, from
// new holders until until, and hands it on then. m.mu must be held.
func (m *Backend) restLocked(key locks.Key, until, now time.Time) {
	m.resting[key] = until
	if until.After(m.delayed[key]) {
		m.delayed[key] = until
	}
	time.AfterFunc(until.Sub(now), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.handOnLocked(key, time.Now())
	})
}

// restingLocked reports until when a released grant's min hold keeps
// the free lock key from new holders (see restLocked). m.mu must be held.
func (m *Backend) restingLocked(key locks.Key, now time.Time) (time.Time, bool) {
	until, ok := m.resting[key]
	if ok && !now.Before(until) {
		delete(m.resting, key)
		ok = false
	}
	return until, ok
}

// freedLocked follows the end of one or more of l's grants: the lock is
// free when none is left, and goes on to the queue. m.mu must be held.
func (m *Backend) freedLocked(key locks.Key, l *memLock, now time.Time) {
	if len(l.holders) == 0 {
		delete(m.locks, key)
		if delete(m.held[key.Namespace], key.Name); len(m.held[key.Namespace]) == 0 {
			delete(m.held, key.Namespace)
		}
	}
	m.handOnLocked(key, now)
}

// handOnLocked gives the lock, when it is free or held shared, to the
// waiters at the head of the queue: the first, and while the lock is held
// shared, each shared one after it, up to the first exclusive one, which
// waits and blocks everyone behind it. m.mu must be held.
func (m *Backend) handOnLocked(key locks.Key, now time.Time) {
	for {
		q := m.queues[key]
		if len(q) == 0 {
			return
		}
		w := q[0]
		if m.ticketDead(w, now) {
			m.unqueueLocked(key, w)
			continue
		}
		l := m.locks[key]
		if l != nil && (l.mode == locks.Exclusive || w.req.Mode == locks.Exclusive || m.sharedFull(l)) {
			return
		}
		if _, delayed := m.delayedLocked(key, now); l == nil && delayed {
			return // delayLocked's timer hands it on
		}
		q[0] = nil
		if len(q) == 1 {
			delete(m.queues, key)
		} else {
			m.queues[key] = q[1:]
		}
		grant := m.grantLocked(key, w, now, "handed_over")
		if w.ticket != nil {
			// Provisional until a poll picks it up: nobody may be polling
			// when the lock reaches the ticket (see ticket_memory.go).
			g := m.locks[key].holders[sumOf(w.token)]
			lease := m.liveness() // its whole pick-up time, whatever TTL it asked for
			g.expiresAt = now.Add(lease)
			g.expiry.Reset(lease)
			m.noteLocked(g, false, now)
			grant.Lease = locks.Lease{FencingToken: g.fence, TTL: lease, ExpiresAt: g.expiresAt}
			if f := w.ticket.handed; f != nil {
				go f(locks.TicketHanded{ID: locks.TicketID(w.token), PickUpBy: g.expiresAt})
			}
		}
		w.grant = &grant
		w.handed <- grant
	}
}

// leave takes w out of the queue, and hands the lock on to the shared
// waiters that w, if exclusive, blocked. If the lock was handed to w
// first, it returns that grant.
func (m *Backend) leave(key locks.Key, w *memWaiter) (locks.Grant, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.grant != nil {
		return *w.grant, true
	}
	m.unqueueLocked(key, w)
	m.handOnLocked(key, time.Now())
	return locks.Grant{}, false
}

// unqueueLocked takes w out of key's queue. m.mu must be held.
func (m *Backend) unqueueLocked(key locks.Key, w *memWaiter) {
	q := m.queues[key]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(m.queues, key)
	} else {
		m.queues[key] = q
	}
}

func (m *Backend) heldError(key locks.Key) (locks.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := &locks.HeldError{}
	now := time.Now()
	if l := m.locks[key]; l != nil {
		held.RetryAfter = max(l.until().Sub(now), 0)
	} else if until, delayed := m.delayedLocked(key, now); delayed {
		held.RetryAfter = until.Sub(now)
		if _, held.MinHold = m.restingLocked(key, now); held.MinHold {
			held.FreeAt = until.UTC()
		}
	}
	return locks.Grant{}, held
}

// holder returns the live grant that token holds and its lock, or nil.
// m.mu must be held.
func (m *Backend) holder(key locks.Key, token string) (*memLock, *memGrant) {
	m.expireLocked(key, time.Now())
	l := m.locks[key]
	if l == nil {
		return nil, nil
	}
	g := l.holders[sumOf(token)]
	if g == nil {
		return nil, nil
	}
	return l, g
}

// holdList is g's hold ids.
func (g *memGrant) holdList() []string {
	if g.holds == nil {
		return []string{locks.BaseHold}
	}
	return g.holds
}

func (g *memGrant) holdCount() int { return len(g.holdList()) }

// Release implements Locker.
func (m *Backend) Release(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	return m.ReleaseHold(ctx, key, token, "")
}

// ReleaseHold implements Locker.
func (m *Backend) ReleaseHold(_ context.Context, key locks.Key, token, hold string) (locks.Released, error) {
	if err := locks.ValidHold(hold); err != nil {
		return locks.Released{}, err
	}
	return m.releaseHold(key, token, hold, "")
}

// allHolds, as the hold to release, ends every hold of the grant: a
// session's end does (ReleaseEnded). No caller's hold id is it.
const allHolds = "*"

// releaseHold ends a hold (allHolds: every one); session, when set, is the
// session whose end released it, for the history.
func (m *Backend) releaseHold(key locks.Key, token, hold, session string) (locks.Released, error) {
	hold = cmp.Or(hold, locks.BaseHold)
	m.mu.Lock()
	defer m.mu.Unlock()
	_, g := m.holder(key, token)
	if g == nil {
		reason := m.whyLocked(token, time.Now())
		if reason == locks.ReasonReleased {
			return locks.Released{}, nil // released already: a repeated release changes nothing
		}
		return locks.Released{}, fmt.Errorf("release %s: %w", key, &locks.NotHolderError{Reason: reason})
	}
	if hold != allHolds {
		i := slices.Index(g.holdList(), hold)
		if i < 0 {
			return locks.Released{Holds: g.holdCount()}, nil // ended before: a repeated release
		}
		if g.holdCount() > 1 {
			g.holds = slices.Delete(slices.Clone(g.holdList()), i, i+1)
			return locks.Released{Holds: len(g.holds)}, nil
		}
	}
	now := time.Now()
	m.endLocked(key, g, now, session)
	return locks.EndedAfter(now.Sub(g.acquiredAt)), nil
}

// Reenter implements Locker.
func (m *Backend) Reenter(_ context.Context, key locks.Key, token string, ttl time.Duration, mode locks.Mode) (locks.Grant, error) {
	if ttl < time.Millisecond {
		return locks.Grant{}, fmt.Errorf("%w: ttl must be at least 1ms", locks.ErrInvalid)
	}
	if locks.IsSessionGrant(token) {
		ttl = time.Millisecond // a hold more, never a lease past the session's
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, g := m.holder(key, token)
	if g == nil {
		return locks.Grant{}, fmt.Errorf("re-enter %s: %w", key, &locks.NotHolderError{Reason: m.whyLocked(token, time.Now())})
	}
	now := time.Now()
	if l.mode != mode {
		return locks.Grant{}, fmt.Errorf("re-enter lock %s %s: held in the other mode: %w", key, mode, &locks.HeldError{RetryAfter: l.until().Sub(now)})
	}
	hold := locks.NewHoldID()
	g.holds = append(slices.Clone(g.holdList()), hold)
	if until := g.capped(now.Add(ttl)); until.After(g.expiresAt) {
		g.expiresAt = until
		g.expiry.Reset(until.Sub(now))
		m.noteLocked(g, false, now)
		g.keepIdem()
	}
	m.eventLocked(key, "re_entered", now, g)
	return locks.Grant{Token: token, Holds: len(g.holds), Hold: hold, Lease: g.lease(g.expiresAt.Sub(now))}, nil
}

// Renew implements Locker.
func (m *Backend) Renew(_ context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if locks.IsSessionGrant(token) {
		return locks.Lease{}, fmt.Errorf("renew %s: %w", key, locks.ErrSessionGrantRenew)
	}
	return m.renew(key, token, ttl)
}

// renew is Renew, for a session's grant too (RenewMember).
func (m *Backend) renew(key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.ValidateRenewTTL(ttl); err != nil {
		return locks.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, g := m.holder(key, token)
	now := time.Now()
	if g == nil {
		return locks.Lease{}, fmt.Errorf("renew %s: %w", key, &locks.NotHolderError{Reason: m.whyLocked(token, now)})
	}
	m.eventLocked(key, "renewed", now, g)
	lease := m.renewLocked(g, ttl, now)
	lease.Mode = l.mode
	return lease, nil
}

// renewLocked moves g's lease to ttl from now (0: the TTL it was granted
// with), with what remembers it: a lock's grant or a permit. m.mu must be
// held.
func (m *Backend) renewLocked(g *memGrant, ttl time.Duration, now time.Time) locks.Lease {
	if ttl == 0 {
		ttl = g.ttl
	}
	g.expiresAt = g.capped(now.Add(ttl))
	ttl = g.expiresAt.Sub(now)
	g.expiry.Reset(ttl)
	m.noteLocked(g, false, now)
	g.keepIdem()
	return g.lease(ttl)
}

// capped is until, or the end of g's break period or its hard cap if that
// is sooner.
func (g *memGrant) capped(until time.Time) time.Time {
	if g.breakBy != "" && g.breakEnd.Before(until) {
		until = g.breakEnd
	}
	if !g.holdEnd.IsZero() && g.holdEnd.Before(until) {
		until = g.holdEnd
	}
	return until
}

// SetValue implements Valuer.
func (m *Backend) SetValue(_ context.Context, key locks.Key, token, value string) (int64, error) {
	if err := locks.ValidateValue(value, locks.Exclusive); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, g := m.holder(key, token)
	switch {
	case g == nil:
		return 0, fmt.Errorf("set the value of %s: %w", key, &locks.NotHolderError{Reason: m.whyLocked(token, time.Now())})
	case l.mode == locks.Shared:
		return 0, fmt.Errorf("set the value of %s: %w", key, locks.ErrSharedValue)
	}
	g.value = value
	m.eventLocked(key, "value_changed", time.Now(), g)
	return g.fence, nil
}

// Inspect implements Locker.
func (m *Backend) Inspect(_ context.Context, key locks.Key) (locks.Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	var index int64
	if h := m.histories[key]; h != nil {
		index = h.index
	}
	l := m.locks[key]
	if l == nil {
		nh := &locks.NotHeldError{Key: key, Index: index}
		if until, ok := m.restingLocked(key, now); ok {
			nh.FreeAt = until.UTC()
		}
		return locks.Info{}, nh
	}
	info := m.infoLocked(key, l, now)
	info.Index = index
	info.QueuePriorities = queuePriorities(m.queues[key])
	return info, nil
}

// queuePriorities are the priorities of queue q's waiters, in the order
// they are served, at most MaxQueueShown of them; nil when nobody waits
// (Info.QueuePriorities).
func queuePriorities(q []*memWaiter) []int {
	var ps []int
	for _, w := range q[:min(len(q), locks.MaxQueueShown)] {
		ps = append(ps, w.req.Priority)
	}
	return ps
}

// infoLocked describes l, the held lock key, for Inspect and List. m.mu
// must be held.
func (m *Backend) infoLocked(key locks.Key, l *memLock, now time.Time) locks.Info {
	info := locks.Info{Mode: l.mode, Waiters: len(m.queues[key])}
	for _, g := range l.holders {
		info.Holders = append(info.Holders, locks.Holder{
			Lease:      g.lease(g.expiresAt.Sub(now)),
			Subject:    g.subject,
			Owner:      g.owner,
			AcquiredAt: g.acquiredAt,
			Holds:      g.holdCount(),
			HoldIDs:    slices.Clone(g.holdList()),
			Value:      g.value,
		})
	}
	slices.SortFunc(info.Holders, func(a, b locks.Holder) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	info.HoldersTotal = len(info.Holders)
	info.Holders = info.Holders[max(len(info.Holders)-locks.MaxHoldersShown, 0):]
	info.Describe()
	return info
}

// Check implements Backend: memory is always reachable.
func (m *Backend) Check(context.Context) error { return nil }

// Close implements Backend. Locks held stay held until their leases end.
func (m *Backend) Close() error { return nil }
