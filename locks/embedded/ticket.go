package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockgate/lockgate/locks"
)

var _ locks.Tickets = (*Backend)(nil)

// A ticket of the embedded backend is a memWaiter in its lock's queue, as
// a connected waiter is, with a memTicket beside it: its polls keep it
// alive, and a grant handed to it is provisional (a lease of at most the
// ticket liveness) until a poll picks it up, as on Redis (see
// lua/ticket.lua). The queue's hand-off skips a ticket whose liveness or
// wait has run out.

// memTicket is one ticket, under Memory.mu.
type memTicket struct {
	key   locks.Key
	w     *memWaiter
	alive time.Time // queued until then without another poll
	ends  time.Time // its wait's end
	// picked is set once a poll picked up the grant handed to it.
	picked bool
	// handed is the request's Handed, set once the ticket is queued
	// (OpenTicket answers a grant handed before that itself).
	handed func(locks.TicketHanded)
}

// liveness is how long a ticket stays queued after each poll.
func (m *Backend) liveness() time.Duration {
	if m.opts.TicketLiveness > 0 {
		return m.opts.TicketLiveness
	}
	return 10 * time.Second
}

// OpenTicket implements Tickets.
func (m *Backend) OpenTicket(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.TicketState, error) {
	if err := req.Validate(); err != nil {
		return locks.TicketState{}, err
	}
	if req.Wait <= 0 {
		return locks.TicketState{}, fmt.Errorf("%w: a ticket needs a wait", locks.ErrInvalid)
	}
	token := locks.NewToken()
	now := time.Now()
	w := &memWaiter{token: token, req: req, handed: make(chan locks.Grant, 1), rank: m.rankOf(req, now)}
	tk := &memTicket{key: key, w: w, ends: now.Add(req.Wait)}
	tk.alive = minTime(tk.ends, now.Add(m.liveness()))
	w.ticket = tk
	g, _, queued := m.tryAcquire(key, w)
	if !queued {
		return locks.TicketState{Grant: &g, Mode: req.Mode}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now = time.Now()
	if w.grant != nil { // handed over between tryAcquire and here
		return m.pickUpLocked(tk, now), nil
	}
	if m.tickets == nil {
		m.tickets = make(map[string]*memTicket)
	}
	id := locks.TicketID(token)
	m.tickets[id] = tk
	tk.handed = req.Handed
	st := m.queuedLocked(tk, now)
	st.ID, st.Token = id, token
	return st, nil
}

// PollTicket implements Tickets.
func (m *Backend) PollTicket(ctx context.Context, key locks.Key, id, token string, wait time.Duration) (locks.TicketState, error) {
	if !locks.TicketOf(id, token) {
		return locks.TicketState{}, fmt.Errorf("poll ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	deadline := time.Now().Add(wait)
	for {
		// While a long-poll waits in this process, the ticket is alive:
		// until the long-poll ends, and the liveness after that.
		st, handed, err := m.poll(key, id, time.Until(deadline))
		if err != nil || st.Grant != nil || time.Until(deadline) <= 0 {
			return st, err
		}
		timeUp := time.NewTimer(time.Until(deadline))
		select {
		case <-handed:
		case <-timeUp.C:
		case <-ctx.Done():
			// The caller left, or the gateway drains: the ticket stays,
			// for the liveness from now, and its last known state is the
			// answer.
			timeUp.Stop()
			m.keepTicket(id, 0)
			return st, nil
		}
		timeUp.Stop()
	}
}

// keepTicket moves ticket id's alive time to the liveness after hold from
// now (never past its wait), if it is queued.
func (m *Backend) keepTicket(id string, hold time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tk := m.tickets[id]; tk != nil && tk.w.grant == nil {
		tk.alive = minTime(tk.ends, time.Now().Add(max(hold, 0)+m.liveness()))
	}
}

// poll runs one poll of ticket id: the grant, picked up, or its place and
// the channel that receives the grant when the lock is handed to it.
// The ticket stays alive for hold (a long-poll's wait) and the liveness
// after it.
func (m *Backend) poll(key locks.Key, id string, hold time.Duration) (locks.TicketState, <-chan locks.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	tk := m.tickets[id]
	if tk == nil || tk.key != key {
		return locks.TicketState{}, nil, fmt.Errorf("poll ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	if tk.w.grant != nil {
		if g := m.liveGrantLocked(tk); g == nil { // its grant ended (its lease, or a pick-up too late)
			delete(m.tickets, id)
			return locks.TicketState{}, nil, fmt.Errorf("poll ticket of lock %s: %w", key, locks.ErrTicketNotFound)
		}
		return m.pickUpLocked(tk, now), nil, nil
	}
	if !now.Before(tk.alive) {
		m.dropTicketLocked(id, tk, now)
		return locks.TicketState{}, nil, fmt.Errorf("poll ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	tk.alive = minTime(tk.ends, now.Add(max(hold, 0)+m.liveness()))
	return m.queuedLocked(tk, now), tk.w.handed, nil
}

// CloseTicket implements Tickets.
func (m *Backend) CloseTicket(ctx context.Context, key locks.Key, id, token string) error {
	if !locks.TicketOf(id, token) {
		return fmt.Errorf("close ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(key, now)
	tk := m.tickets[id]
	if tk == nil || tk.key != key {
		return fmt.Errorf("close ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	if tk.w.grant != nil {
		delete(m.tickets, id)
		if g := m.liveGrantLocked(tk); g != nil {
			m.endLocked(key, g, now, "")
		}
		return nil
	}
	if !now.Before(tk.alive) {
		m.dropTicketLocked(id, tk, now)
		return fmt.Errorf("close ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	m.dropTicketLocked(id, tk, now)
	return nil
}

// liveGrantLocked returns the live grant handed to tk, or nil. m.mu must
// be held.
func (m *Backend) liveGrantLocked(tk *memTicket) *memGrant {
	l := m.locks[tk.key]
	if l == nil {
		return nil
	}
	return l.holders[sumOf(tk.w.token)]
}

// pickUpLocked answers the grant handed to tk, which is live: the first
// poll picks it up (its lease becomes the TTL asked for, from now); a
// later one answers what remains of it. m.mu must be held.
func (m *Backend) pickUpLocked(tk *memTicket, now time.Time) locks.TicketState {
	g := m.liveGrantLocked(tk)
	if !tk.picked {
		tk.picked = true
		m.renewLocked(g, tk.w.req.TTL, now)
	}
	grant := locks.Grant{Token: tk.w.token, Holds: g.holdCount(), HandoffDelay: now.Sub(g.acquiredAt),
		Lease: locks.Lease{FencingToken: g.fence, TTL: g.expiresAt.Sub(now), ExpiresAt: g.expiresAt, HoldUntil: g.holdEnd}}
	return locks.TicketState{Grant: &grant, Mode: tk.w.req.Mode}
}

// queuedLocked is tk's place in its queue. m.mu must be held.
func (m *Backend) queuedLocked(tk *memTicket, now time.Time) locks.TicketState {
	st := locks.TicketState{Rank: max(slices.Index(m.queues[tk.key], tk.w), 0), Liveness: m.liveness()}
	if l := m.locks[tk.key]; l != nil {
		st.RetryAfter = max(l.until().Sub(now), 0)
	}
	return st
}

// dropTicketLocked takes tk out of its queue, and hands the lock on to
// those it blocked. m.mu must be held.
func (m *Backend) dropTicketLocked(id string, tk *memTicket, now time.Time) {
	delete(m.tickets, id)
	m.unqueueLocked(tk.key, tk.w)
	m.handOnLocked(tk.key, now)
}

// ticketDead reports whether w, at the head of its queue, is a ticket
// that can no longer be served: not polled within the liveness, or past
// its wait. m.mu must be held.
func (m *Backend) ticketDead(w *memWaiter, now time.Time) bool {
	if w.ticket == nil {
		return false
	}
	if now.Before(w.ticket.alive) {
		return false
	}
	delete(m.tickets, locks.TicketID(w.token))
	return true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
