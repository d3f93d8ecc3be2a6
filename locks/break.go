package locks

import (
	"context"
	"fmt"
	"time"
)

// Breaker is what a backend offers the administrators of a namespace:
// ending grants that are not theirs. Who may call it is the caller's to
// decide (the gateway asks auth.Claims.Administers); the backend needs no
// owner token.
type Breaker interface {
	// Break ends every grant of the lock (the exclusive one, or every
	// shared one), and hands the lock to the waiters at the head of its
	// queue as a release does: the next grant has a larger fencing token.
	// by, the breaker's subject, goes into the history's "broken" events.
	// Each broken grant's holder learns it at its next renew, re-entry or
	// release after the grant ended: a *NotHolderError with ReasonBroken
	// (for RecordTTL). A lock nobody holds gets ErrNotHeld, and nothing
	// changes. A break whose outcome is unknown (ErrUnavailable) may have
	// happened: breaking again may end the next holder's grant.
	//
	// A period of 0 ends the grants now. A longer one lets each run on
	// until the least of its lease, the period, and the end of an earlier
	// break (a break shortens a period, never lengthens it): until then
	// its holder may work, renew (its lease never passes that end, and the
	// renewal says so in its TTL) and release as usual; then the grant
	// ends broken, and the lock goes on as when a lease ends. A grant
	// handed to a waiter that has not picked it up yet ends now whatever
	// the period.
	Break(ctx context.Context, key Key, by string, period time.Duration) (Broken, error)
}

// Broken is what a Break ended.
type Broken struct {
	// Grants is how many grants it ended, or will end at its period's
	// end: 1 for an exclusive holder, or the number of shared holders.
	Grants int
	// Left is how long until the last of them ends: 0 when all ended now.
	Left time.Duration
}

// ValidBreakPeriod refuses a negative period, or one with a fraction of a
// millisecond, which the Redis backend could not keep.
func ValidBreakPeriod(period time.Duration) error {
	if period < 0 || period%time.Millisecond != 0 {
		return fmt.Errorf("%w: a break period is whole milliseconds, 0 or more", ErrInvalid)
	}
	return nil
}
