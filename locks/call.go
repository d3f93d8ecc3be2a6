package locks

import "context"

// Call is one acquire as its caller asked for it: which lock (or, with
// Limit, which semaphore's permit), the request, and each feature the call
// uses as a field of its own. Obtain decides, in this one place, which of
// them apply and which combinations mean nothing; the caller builds one
// Call and makes one call.
type Call struct {
	Key Key
	Req AcquireRequest
	// Limit, above 0, asks for a permit of the semaphore Key, whose limit
	// it is; 0 asks for the lock Key.
	Limit int
	// Reenter is the owner token of a grant of Key to take once more (see
	// Locker.Reenter); "" for a new grant.
	Reenter string
	// Session is the token of the session whose lease the grant takes
	// (see Sessions); "" for none.
	Session string
	// IdempotencyKey makes a retry of the call answer the grant of the
	// first (see Idempotent); "" for none.
	IdempotencyKey string
	// Ticket asks for a ticket (see Tickets) when the call would wait:
	// with Req.Wait above 0 the call is answered by OpenTicket; without,
	// it is a plain acquire, as a preference that cannot be met is.
	Ticket bool
}

// Obtained is what Obtain got: a grant, or a ticket.
type Obtained struct {
	Grant Grant
	// Ticket is set when a ticket answered the call: queued, or granted at
	// once (then Ticket.Grant is set, and Grant is it too).
	Ticket *TicketState
	// Reentered is set when the call took one more hold of a grant.
	Reentered bool
}

// CallError refuses a Call whose features do not go together. It matches
// ErrInvalid.
type CallError struct{ Reason string }

func (e *CallError) Error() string        { return ErrInvalid.Error() + ": " + e.Reason }
func (e *CallError) Detail() string       { return e.Reason }
func (e *CallError) Is(target error) bool { return target == ErrInvalid }

// TicketApplies reports whether a ticket answers c: the caller's limits on
// waiting differ for a ticket (a gateway's --max-ticket-wait).
func (c Call) TicketApplies() bool {
	return c.Ticket && c.Reenter == "" && c.Limit == 0 && c.Req.Wait > 0
}

// Check refuses the combinations of features that cannot mean anything,
// before anything is asked of a backend. Each reason says why.
func (c Call) Check() error {
	switch {
	case c.Reenter != "" && c.IdempotencyKey != "":
		return &CallError{"an Idempotency-Key cannot come with a Lock-Token: a retried re-entry would take one more hold"}
	case c.Session != "" && c.Reenter != "":
		return &CallError{"a Session-Token cannot be combined with a Lock-Token: a re-entry keeps its grant's lease"}
	case c.Session != "" && c.IdempotencyKey != "":
		return &CallError{"a Session-Token cannot be combined with an Idempotency-Key"}
	case c.Session != "" && c.Ticket && c.Req.Wait > 0:
		return &CallError{"a Session-Token cannot be combined with Prefer: respond-async: tickets cannot join a session"}
	case c.IdempotencyKey != "" && c.Ticket && c.Req.Wait > 0 && c.Reenter == "":
		return &CallError{"an Idempotency-Key cannot be combined with Prefer: respond-async: poll the ticket again instead of retrying the acquire"}
	case c.Req.MinHold > 0 && c.Reenter != "":
		return &CallError{"min_hold_ms cannot come with a Lock-Token: a re-entry keeps its grant's"}
	case c.Req.MinHold > 0 && c.TicketApplies():
		return &CallError{"min_hold_ms cannot be combined with Prefer: respond-async: tickets carry no min hold"}
	case c.Req.Handed != nil && !c.TicketApplies():
		return &CallError{"callback_url is for tickets only: an acquire with wait_ms and Prefer: respond-async"}
	}
	return nil
}

// Obtain makes the call on b: a re-entry, a ticket, an acquire in a
// session, an idempotent acquire or a plain one, of a lock or a permit.
// An idempotent call's grant is kept when ctx ends as it is made (a retry
// with the key receives it); any other such grant is the caller's to give
// back.
func Obtain(ctx context.Context, b Backend, c Call) (Obtained, error) {
	if err := c.Check(); err != nil {
		return Obtained{}, err
	}
	var g Grant
	var err error
	switch {
	case c.Reenter != "":
		g, err = b.Reenter(ctx, c.Key, c.Reenter, c.Req.TTL, c.Req.Mode)
		return Obtained{Grant: g, Reentered: err == nil}, err
	case c.TicketApplies():
		st, err := b.OpenTicket(ctx, c.Key, c.Req)
		if err != nil {
			return Obtained{}, err
		}
		o := Obtained{Ticket: &st}
		if st.Grant != nil {
			o.Grant = *st.Grant
		}
		return o, nil
	case c.Limit > 0:
		sr := SemaphoreRequest{AcquireRequest: c.Req, Limit: c.Limit}
		switch {
		case c.Session != "":
			g, err = b.AcquirePermitInSession(ctx, c.Session, c.Key, sr)
		case c.IdempotencyKey != "":
			g, err = b.AcquirePermitOnce(ctx, c.Key, sr, c.IdempotencyKey)
		default:
			g, err = b.AcquirePermit(ctx, c.Key, sr)
		}
	case c.Session != "":
		g, err = b.AcquireInSession(ctx, c.Session, c.Key, c.Req)
	case c.IdempotencyKey != "":
		g, err = b.AcquireOnce(ctx, c.Key, c.Req, c.IdempotencyKey)
	default:
		g, err = b.Acquire(ctx, c.Key, c.Req)
	}
	return Obtained{Grant: g}, err
}
