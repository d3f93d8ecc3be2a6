package locks

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"time"
)

// Tickets is what a backend offers callers that wait longer than one call
// (a serverless function cut off between invocations): a ticket holds the
// caller's place in a lock's queue, in arrival order with every other
// waiter, while the caller polls it. A ticket that is not polled within
// the backend's ticket liveness is dropped, as a waiter whose gateway died
// is; so is a grant handed to a ticket that no poll picks up within the
// liveness: it passes to the next in line. The ticket token is the
// ticket's only secret, and becomes the owner token of the grant the
// ticket is handed.
//
// Both backends have tickets, and pass the same conformance cases
// (locktest.RunTickets).
type Tickets interface {
	// OpenTicket asks for the lock as Acquire does with req.Wait > 0,
	// but answers at once: with the grant when the lock was free for the
	// caller (TicketState.Grant), or with a ticket queued for up to
	// req.Wait.
	OpenTicket(ctx context.Context, key Key, req AcquireRequest) (TicketState, error)
	// PollTicket keeps the ticket alive, and returns the grant once the
	// lock reached it (picking the grant up), or its place in the queue.
	// With wait > 0 it waits up to that long for the grant. A poll after
	// the pick-up returns the grant again, with what remains of its lease.
	// A ticket that is gone, or a token that is not its, gets
	// ErrTicketNotFound.
	PollTicket(ctx context.Context, key Key, id, token string, wait time.Duration) (TicketState, error)
	// CloseTicket takes the ticket out of the queue, and releases the
	// grant it was handed, if any.
	CloseTicket(ctx context.Context, key Key, id, token string) error
}

// TicketState is what a ticket's call returns: a grant, or a place in
// the queue.
type TicketState struct {
	// Grant is set once the ticket got the lock; its Token is the ticket
	// token. Mode is how it holds the lock (the mode the ticket asked for).
	Grant *Grant
	Mode  Mode
	// ID and Token name the ticket (OpenTicket only, when queued).
	ID, Token string
	// Rank is the ticket's place in the queue, 0 at its head.
	Rank int
	// RetryAfter is when the current holder's lease ends, unless renewed.
	RetryAfter time.Duration
	// Liveness is how long the ticket stays queued without another poll.
	Liveness time.Duration
}

// ticketIDLabel keeps ticket ids apart from every other use of a token.
const ticketIDLabel = "lockgate ticket id v1\x00"

// TicketID is the id of the ticket whose token is token: public (it is in
// the ticket's URL), and tied to its token, so that a token opens its own
// ticket only.
func TicketID(token string) string {
	sum := sha256.Sum256([]byte(ticketIDLabel + token))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// TicketOf reports whether token is the token of ticket id.
func TicketOf(id, token string) bool {
	return subtle.ConstantTimeCompare([]byte(TicketID(token)), []byte(id)) == 1
}

// DefaultTicketLiveness is the ticket liveness unless configured: twice
// the minute between two invocations of a function that a scheduler runs
// every minute, so that a late invocation or a cold start still finds its
// ticket (a liveness of 10 s lost it between any two).
const DefaultTicketLiveness = 2 * time.Minute
