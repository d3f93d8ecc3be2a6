package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockgate/lockgate/callbacks"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
	"github.com/lockgate/lockgate/ratelimit"
)

// MaxLongPoll bounds the Prefer: wait=N of a ticket's poll.
const MaxLongPoll = 30 * time.Second

// preferences are what a Prefer header asks for (RFC 7240) that the
// gateway honours; every other preference is ignored, as the RFC allows.
type preferences struct {
	respondAsync bool
	wait         time.Duration // 0: none; at most MaxLongPoll
}

// parsePrefer reads a Prefer header: preferences separated by commas, each
// a token, optionally "=value" (a token or a quoted string), then
// parameters after ';', which no preference here uses. A wait that is not
// a whole number of seconds is ignored.
func parsePrefer(h *string) preferences {
	var p preferences
	if h == nil {
		return p
	}
	for _, pref := range strings.Split(*h, ",") {
		pref, _, _ = strings.Cut(pref, ";")
		name, value, _ := strings.Cut(strings.TrimSpace(pref), "=")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.Trim(strings.TrimSpace(value), `"`)
		switch name {
		case "respond-async":
			p.respondAsync = true
		case "wait":
			if n, err := strconv.ParseUint(value, 10, 32); err == nil {
				p.wait = min(time.Duration(n)*time.Second, MaxLongPoll)
			}
		}
	}
	return p
}

// ticketMetrics count the polls of tickets, apart from acquires.
type ticketMetrics struct {
	polls *prometheus.CounterVec
}

// Poll outcomes, the values of the "outcome" label (besides those of
// acquires: granted, cancelled, error).
const (
	outcomeTicket   = "ticket"    // an acquire answered with a ticket (202)
	outcomeWaiting  = "waiting"   // a poll of a ticket still queued
	outcomeNotFound = "not_found" // a poll of a ticket that is gone, or with another token
)

func newTicketMetrics(reg prometheus.Registerer) *ticketMetrics {
	m := &ticketMetrics{polls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockgate_ticket_polls_total",
		Help: "Polls of tickets (GET /locks/{namespace}/{name}/tickets/{ticket}) by outcome: granted, waiting, not_found, refused, error.",
	}, []string{"outcome"})}
	reg.MustRegister(m.polls)
	for _, o := range []string{outcomeGranted, outcomeWaiting, outcomeNotFound, outcomeError} {
		m.polls.WithLabelValues(o)
	}
	return m
}

// openTicket makes a call that a ticket answers: a grant at once on a
// free lock, else a 202 with the queued ticket, which counts against its
// subject's waiters until it ends (see ticketWaiters; past them, a 429).
func (s *Server) openTicket(ctx context.Context, c grantCall) (AcquireLockResponseObject, error) {
	key := c.call.Key
	claims, _ := middleware.ClaimsFromContext(ctx)
	w, err := s.cfg.Subjects.StartWait(claims)
	if err != nil {
		s.metrics.acquires.WithLabelValues(outcomeRefused).Inc()
		return nil, fmt.Errorf("open ticket for lock %s: %w", key, err)
	}
	o, err := locks.Obtain(ctx, s.cfg.Backend, c.call)
	if err != nil {
		w.Done()
		s.metrics.acquires.WithLabelValues(acquireOutcome(err)).Inc()
		return nil, err
	}
	st := *o.Ticket
	if st.Grant != nil {
		w.Done()
		s.metrics.acquires.granted.Inc()
		gr := &granted{s: s, ctx: ctx, c: c, grant: o.Grant}
		gr.lock = s.grantBody(ctx, key, &gr.grant, c.call.Req.Mode, c.signed)
		return gr, nil
	}
	s.ticketWaiters.add(st.ID, st.Token, w, c.call.Req.Wait)
	s.metrics.acquires.WithLabelValues(outcomeTicket).Inc()
	q := ticketQueued{
		location: ticketPath(key, st.ID),
		body: Ticket{
			Lock:         key.String(),
			Ticket:       st.ID,
			TicketToken:  st.Token,
			Rank:         st.Rank,
			PollWithinMs: st.Liveness.Milliseconds(),
			RetryAfterMs: st.RetryAfter.Milliseconds(),
		},
	}
	if c.call.Req.Handed != nil {
		// The ticket's notifications are signed with a secret of its own,
		// its caller's alone (see callbacks.Secret.ForTicket).
		secret := s.cfg.Callbacks.TicketSecret(key.String(), st.ID).Encode()
		q.body.CallbackSecret = &secret
	}
	return q, nil
}

// ticketPath is the path of ticket id of key, for its polls.
func ticketPath(key locks.Key, id string) string {
	return "/locks/" + url.PathEscape(key.Namespace) + "/" + url.PathEscape(key.Name) + "/tickets/" + id
}

// callback checks a callback_url against the gateway's allowed
// destinations: where a ticket's notification may go. Whether the call may
// have one at all is locks.Call.Check's to say.
func (s *Server) callback(url string) (callbacks.Destination, error) {
	if s.cfg.Callbacks == nil {
		return callbacks.Destination{}, invalid("this gateway allows no callback destinations (its operator sets them with --callback-allow)")
	}
	d, err := s.cfg.Callbacks.Check(url)
	if err != nil {
		return callbacks.Destination{}, invalid("callback_url: " + err.Error())
	}
	return d, nil
}

// ticketQueued is the 202 of an acquire answered with a ticket. Its body
// holds the ticket's secrets (its token, its callback secret): no cache
// may keep it.
type ticketQueued struct {
	location string
	body     Ticket
}

// VisitAcquireLockResponse implements AcquireLockResponseObject.
func (q ticketQueued) VisitAcquireLockResponse(w http.ResponseWriter) error {
	w.Header().Set("Location", q.location)
	w.Header().Set("Preference-Applied", "respond-async")
	return writeJSON(w, http.StatusAccepted, q.body)
}

// ticketGranted is the 201 of a ticket's poll. A grant it fails to
// deliver is kept: the next poll answers it again.
type ticketGranted struct{ body Grant }

// VisitPollTicketResponse implements PollTicketResponseObject.
func (g ticketGranted) VisitPollTicketResponse(w http.ResponseWriter) error {
	return writeJSON(w, http.StatusCreated, g.body)
}

// writeJSON writes body with status, marked for no cache to keep.
func writeJSON(w http.ResponseWriter, status int, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// ticketsOf is the backend's tickets, or ErrTicketNotFound when it has
// none (the embedded backend).
func (s *Server) ticketsOf(key locks.Key) (locks.Tickets, error) {
	if s.cfg.Tickets == nil {
		return nil, fmt.Errorf("ticket of %s: %w", key, locks.ErrTicketNotFound)
	}
	return s.cfg.Tickets, nil
}

// PollTicket implements StrictServerInterface.
func (s *Server) PollTicket(ctx context.Context, req PollTicketRequestObject) (PollTicketResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	tickets, err := s.ticketsOf(key)
	if err != nil {
		s.metrics.tickets.polls.WithLabelValues(outcomeNotFound).Inc()
		return nil, err
	}
	sign, err := s.signs(req.Params.Signed)
	if err != nil {
		s.metrics.tickets.polls.WithLabelValues(outcomeRefused).Inc()
		return nil, err
	}
	wait := parsePrefer(req.Params.Prefer).wait
	if c, _ := middleware.ClaimsFromContext(ctx); wait > 0 && !c.ExpiresAt.IsZero() {
		// A long-poll never outlives its token.
		wait = max(min(wait, time.Until(c.ExpiresAt)), time.Millisecond)
	}
	if wait > 0 {
		// A long-poll holds a connection as a waiter does: the same caps.
		done, err := s.startLongPoll(ctx, req.Ticket, req.Params.TicketToken)
		if err != nil {
			s.metrics.tickets.polls.WithLabelValues(outcomeRefused).Inc()
			return nil, err
		}
		defer done()
		// A draining gateway ends long-polls with the ticket's state.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.draining, cancel)()
	}
	st, err := tickets.PollTicket(ctx, key, req.Ticket, req.Params.TicketToken, wait)
	if st.Grant != nil || errors.Is(err, locks.ErrTicketNotFound) {
		s.ticketWaiters.done(req.Ticket, req.Params.TicketToken) // it waits no more
	}
	switch {
	case err != nil:
		outcome := outcomeError
		if errors.Is(err, locks.ErrTicketNotFound) {
			outcome = outcomeNotFound
		}
		s.metrics.tickets.polls.WithLabelValues(outcome).Inc()
		return nil, err
	case st.Grant != nil:
		s.metrics.tickets.polls.WithLabelValues(outcomeGranted).Inc()
		return ticketGranted{body: s.grantBody(ctx, key, st.Grant, st.Mode, sign)}, nil
	}
	s.metrics.tickets.polls.WithLabelValues(outcomeWaiting).Inc()
	return PollTicket200JSONResponse{
		Lock:         key.String(),
		Ticket:       req.Ticket,
		Rank:         st.Rank,
		PollWithinMs: st.Liveness.Milliseconds(),
		RetryAfterMs: st.RetryAfter.Milliseconds(),
	}, nil
}

// CloseTicket implements StrictServerInterface.
func (s *Server) CloseTicket(ctx context.Context, req CloseTicketRequestObject) (CloseTicketResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	tickets, err := s.ticketsOf(key)
	if err != nil {
		return nil, err
	}
	err = tickets.CloseTicket(ctx, key, req.Ticket, req.Params.TicketToken)
	if err == nil || errors.Is(err, locks.ErrTicketNotFound) {
		s.ticketWaiters.done(req.Ticket, req.Params.TicketToken)
	}
	if err != nil {
		return nil, err
	}
	return CloseTicket204Response{}, nil
}

// startLongPoll counts a long-poll of ticket id (with token) against the
// caller's and the gateway's caps on waiters, and returns what ends it.
// A ticket counted here already counts against the caller's cap: its long
// poll takes no second place there.
func (s *Server) startLongPoll(ctx context.Context, id, token string) (done func(), err error) {
	var w ratelimit.Waiting
	if !s.ticketWaiters.counted(id, token) {
		claims, _ := middleware.ClaimsFromContext(ctx)
		if w, err = s.cfg.Subjects.StartWait(claims); err != nil {
			return nil, fmt.Errorf("poll ticket: %w", err)
		}
	}
	if s.waiting.Add(1) > int64(s.cfg.MaxWaiters) {
		s.waiting.Add(-1)
		w.Done()
		return nil, fmt.Errorf("poll ticket: %w", errTooManyWaiters)
	}
	return func() { s.waiting.Add(-1); w.Done() }, nil
}
