package locks

import (
	"context"
	"fmt"
	"time"
)

// Semaphores is what every backend offers besides locks: counting
// semaphores, which up to a limit of holders hold at once. Each permit has
// its own owner token, lease and fencing token, as a lock's grant does, and
// waiters queue for permits in arrival order, as they do for a lock. A
// semaphore and a lock of the same name are unrelated.
type Semaphores interface {
	// AcquirePermit takes one of req.Limit permits. When all are taken it
	// returns an error matching ErrFull (a *FullError with the time until
	// the soonest lease ends), unless req.Wait > 0: then it queues. A limit
	// other than the one in force while anyone holds or waits is refused
	// with a *LimitMismatchError; on an idle semaphore the new limit applies.
	AcquirePermit(ctx context.Context, key Key, req SemaphoreRequest) (Grant, error)
	// ReleasePermit gives back the permit token holds, or returns
	// ErrNotHolder.
	ReleasePermit(ctx context.Context, key Key, token string) error
	// RenewPermit extends the lease of the permit token holds, as Renew does
	// for a lock.
	RenewPermit(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error)
	// InspectSemaphore describes the holders, or returns ErrNotHeld when
	// nobody holds a permit.
	InspectSemaphore(ctx context.Context, key Key) (SemaphoreInfo, error)
}

// SemaphoreRequest says how to take a permit.
type SemaphoreRequest struct {
	AcquireRequest
	// Limit is how many permits the semaphore has, 1 to MaxLimit.
	Limit int
}

// MaxLimit is the largest semaphore limit.
const MaxLimit = 10000

func (r SemaphoreRequest) validate() error {
	if r.Limit < 1 || r.Limit > MaxLimit {
		return fmt.Errorf("%w: limit must be 1 to %d", ErrInvalid, MaxLimit)
	}
	if r.Mode != Exclusive {
		return fmt.Errorf("%w: a semaphore permit has no mode", ErrInvalid)
	}
	if r.Value != "" {
		return fmt.Errorf("%w: a semaphore permit carries no value", ErrInvalid)
	}
	return r.AcquireRequest.validate()
}

// SemaphoreInfo describes a semaphore in use.
type SemaphoreInfo struct {
	Limit int
	// Holders are the live permits, the soonest to end first.
	Holders []Holder
	// Waiters is how many callers wait for a permit.
	Waiters int
}

// Holder describes one live grant, without its owner token.
type Holder struct {
	Lease
	Subject    string
	Owner      string
	AcquiredAt time.Time
	// Holds counts a lock holder's re-entrant holds (see Reenter); 1 for a
	// permit.
	Holds int
	// HoldIDs names a lock holder's holds: BaseHold for its acquire's, and
	// each Reenter's Grant.Hold. Empty for a permit.
	HoldIDs []string
	// Value is an exclusive lock holder's value (see
	// AcquireRequest.Value); "" for none, and for a permit.
	Value string
}
