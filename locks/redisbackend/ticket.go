package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
)

var _ locks.Tickets = (*Backend)(nil)

// A ticket is an entry of the lock's queue like any waiter's, whose waiter
// id is the ticket id and whose token hash is that of the ticket token:
// the hand-off treats it as every other waiter, in arrival order, and
// hands it a provisional grant that the next poll picks up (see
// lua/ticket.lua). Its polls, through any gateway, keep it alive; a
// long-poll listens on this gateway's channel for the hand-off message,
// and nothing else.

// OpenTicket implements Tickets.
func (r *Backend) OpenTicket(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.TicketState, error) {
	if err := req.Validate(); err != nil {
		return locks.TicketState{}, err
	}
	if req.Wait <= 0 {
		return locks.TicketState{}, fmt.Errorf("%w: a ticket needs a wait", locks.ErrInvalid)
	}
	res := resource{lockKind, key}
	token := locks.NewToken()
	id, h := locks.TicketID(token), locks.TokenHash(token)
	if req.Handed != nil {
		// Listening before the ticket is queued: a hand-off right after
		// it must not go unheard.
		r.waiters.watchTicket(id, req.Handed, req.Wait)
		if err := r.waiters.ready(ctx); err != nil {
			r.waiters.unwatchTicket(id)
			return locks.TicketState{}, locks.Unavailable("open ticket for", res, err)
		}
	}
	start := time.Now()
	call := newCallID()
	rp, ackErr, err := r.callTicket(ctx, key, call, ticketArgs{op: ticketNew, id: id, tokHash: h,
		wait: req.Wait, ttl: req.TTL, subject: req.Subject, owner: req.Owner, mode: req.Mode, value: req.Value, maxHold: req.MaxHold, priority: req.Priority})
	if err != nil {
		r.waiters.unwatchTicket(id)
		r.abandon(ctx, res, id, h, call) // the script may have queued it, or granted
		return locks.TicketState{}, locks.Unavailable("open ticket for", res, err)
	}
	if rp.granted && ackErr != nil {
		r.waiters.unwatchTicket(id)
		r.abandon(ctx, res, id, h, "") // as for an unknown outcome: leave, release
		return locks.TicketState{}, locks.Unavailable("open ticket for", res, ackErr)
	}
	st := r.ticketState(ctx, res, rp, token, start)
	if st.Grant == nil {
		st.ID, st.Token = id, token
	} else {
		r.waiters.unwatchTicket(id)
	}
	return st, nil
}

// ticketState is what a reply of the ticket script says about the ticket
// of res whose token is token, sent at start. A grant's hard cap is the
// script's to say, counted from start as the lease is: a poll does not
// know the ticket's request.
func (r *Backend) ticketState(ctx context.Context, res resource, rp ticketReply, token string, start time.Time) locks.TicketState {
	if rp.granted {
		lease := rp.lease(start, 0)
		lease.HoldUntil = holdUntil(start, rp.capLeft)
		g := locks.Grant{Token: token, Lease: lease.WithinHold(), HandoffDelay: rp.handoffDelay(start), Holds: 1}
		st := locks.TicketState{Grant: &g}
		if rp.shared {
			st.Mode = locks.Shared
		}
		return st
	}
	return locks.TicketState{Rank: int(max(rp.rank, 0)), RetryAfter: rp.ttl, Liveness: r.opts.TicketLiveness}
}

// PollTicket implements Tickets.
func (r *Backend) PollTicket(ctx context.Context, key locks.Key, id, token string, wait time.Duration) (locks.TicketState, error) {
	if !locks.TicketOf(id, token) {
		return locks.TicketState{}, fmt.Errorf("poll ticket of lock %s: %w", key, locks.ErrTicketNotFound)
	}
	res := resource{lockKind, key}
	if wait <= 0 {
		return r.poll(ctx, res, id, token)
	}
	w := r.waiters.registerTicket(res, id)
	defer r.waiters.unregister(w, false)
	if err := r.waiters.ready(ctx); err != nil {
		return locks.TicketState{}, locks.Unavailable("poll ticket of", res, err)
	}
	deadline := time.Now().Add(wait)
	// Each run of the script keeps the ticket alive for the liveness:
	// a long-poll longer than that runs it a few times, at most once a
	// second (a short liveness made it dozens: keep the liveness above 1s).
	keep := time.NewTicker(max(r.opts.TicketLiveness/3, time.Second))
	defer keep.Stop()
	holderEnds := time.NewTimer(time.Hour)
	defer holderEnds.Stop()
	timeUp := time.NewTimer(wait)
	defer timeUp.Stop()
	for {
		st, err := r.poll(ctx, res, id, token)
		if err != nil || st.Grant != nil || !time.Now().Before(deadline) {
			return st, err
		}
		// As for a connected waiter: nobody publishes the end of a lease,
		// so the head of the queue looks again when it ends.
		holderEnds.Stop()
		if st.Rank == 0 {
			holderEnds.Reset(max(st.RetryAfter, time.Millisecond))
		}
		select {
		case <-w.wake:
		case <-keep.C:
		case <-holderEnds.C:
		case <-timeUp.C:
		case <-ctx.Done():
			// The caller left, or the gateway drains: the ticket stays, and
			// its last known state is the answer.
			return st, nil
		}
	}
}

// poll runs the ticket script once for a poll. Its outcome, when unknown,
// is safe to leave: the caller polls again, and gets the same answer. So
// is a grant the replicas did not acknowledge: the ticket keeps it, and the
// next poll, whose own WAIT covers it, answers it.
func (r *Backend) poll(ctx context.Context, res resource, id, token string) (locks.TicketState, error) {
	start := time.Now()
	rp, ackErr, err := r.callTicket(ctx, res.key, newCallID(), ticketArgs{op: ticketPoll, id: id, tokHash: locks.TokenHash(token)})
	if err != nil {
		return locks.TicketState{}, locks.Unavailable("poll ticket of", res, err)
	}
	if rp.granted && ackErr != nil {
		return locks.TicketState{}, locks.Unavailable("poll ticket of", res, ackErr)
	}
	if !rp.found {
		return locks.TicketState{}, fmt.Errorf("poll ticket of %s: %w", res, locks.ErrTicketNotFound)
	}
	return r.ticketState(ctx, res, rp, token, start), nil
}

// CloseTicket implements Tickets.
func (r *Backend) CloseTicket(ctx context.Context, key locks.Key, id, token string) error {
	res := resource{lockKind, key}
	if !locks.TicketOf(id, token) {
		return fmt.Errorf("close ticket of %s: %w", res, locks.ErrTicketNotFound)
	}
	rp, _, err := r.callTicket(ctx, key, newCallID(), ticketArgs{op: ticketCancel, id: id, tokHash: locks.TokenHash(token)})
	if err != nil {
		return locks.Unavailable("close ticket of", res, err)
	}
	if !rp.found {
		return fmt.Errorf("close ticket of %s: %w", res, locks.ErrTicketNotFound)
	}
	return nil
}
