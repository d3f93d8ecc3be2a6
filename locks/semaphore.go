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
	// ErrNotHolder. A permit given back already changes nothing, and
	// ends nothing.
	ReleasePermit(ctx context.Context, key Key, token string) (Released, error)
	// RenewPermit extends the lease of the permit token holds, as Renew does
	// for a lock.
	RenewPermit(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error)
	// InspectSemaphore describes the holders, and the semaphore's index
	// (see SemaphoreWatch), or returns a *NotHeldError with that index
	// when nobody holds a permit.
	InspectSemaphore(ctx context.Context, key Key) (SemaphoreInfo, error)
	// WatchSemaphore returns the semaphore's state as soon as its index
	// is not after: at once when it is not, else at its next change. When
	// ctx ends first it returns the state at after, with ctx's error. An
	// index below 0 asks for the state now, at once.
	WatchSemaphore(ctx context.Context, key Key, after int64) (SemaphoreWatch, error)
	// ResizeSemaphore makes limit, 1 to MaxLimit, the limit in force of a
	// semaphore in use: a raised limit hands the new permits to waiters at
	// once; a lowered one takes no permit back, and grants nothing until
	// fewer than limit hold. An acquire that asks for another limit is
	// then refused (LimitMismatchError) until the semaphore is idle, but a
	// waiter already queued waits on under the new limit. A semaphore
	// nobody holds or waits for keeps no limit: ErrNotHeld.
	ResizeSemaphore(ctx context.Context, key Key, limit int) (SemaphoreSize, error)
}

// SemaphoreSize is a semaphore's limit in force, and how many hold and
// wait for its permits.
type SemaphoreSize struct {
	Limit, Holders, Waiters int
}

// SemaphoreRequest says how to take a permit.
type SemaphoreRequest struct {
	AcquireRequest
	// Limit is how many permits the semaphore has, 1 to MaxLimit.
	Limit int
}

// MaxLimit is the largest semaphore limit.
const MaxLimit = 10000

func (r SemaphoreRequest) Validate() error {
	if err := ValidateLimit(r.Limit); err != nil {
		return err
	}
	if r.Mode != Exclusive {
		return fmt.Errorf("%w: a semaphore permit has no mode", ErrInvalid)
	}
	if r.Value != "" {
		return fmt.Errorf("%w: a semaphore permit carries no value", ErrInvalid)
	}
	return r.AcquireRequest.Validate()
}

func ValidateLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return fmt.Errorf("%w: limit must be 1 to %d", ErrInvalid, MaxLimit)
	}
	return nil
}

// SemaphoreWatch is a semaphore's state, as WatchSemaphore returns it.
//
// A semaphore's index moves on with every change of what InspectSemaphore
// describes (a permit taken, picked up, renewed, released or expired, a
// waiter that joins or leaves, the limit changed), and never repeats or
// goes back, as a lock's (see Watcher): it lives in the semaphore's own
// record, which outlives its last use by the fence retention; a record
// that begins (the first use, or the first after the record was lost)
// starts it from the backend's clock in microseconds. It is 0 while the
// semaphore has no record. A lease that ended with no call on the
// semaphore since counts as ended.
type SemaphoreWatch struct {
	// Index is the semaphore's index in the state Info describes.
	Index int64
	// Held says whether anyone holds a permit; Info describes the holders
	// then.
	Held bool
	Info SemaphoreInfo
}

// SemaphoreInfo describes a semaphore in use.
type SemaphoreInfo struct {
	// Index is the semaphore's index (see SemaphoreWatch).
	Index int64
	Limit int
	// Holders are the live permits, the soonest to end first.
	Holders []Holder
	// Waiters is how many callers wait for a permit.
	Waiters int
	// QueuePriorities are the priorities the waiters asked for, in the
	// order they are served, at most MaxQueueShown of them; nil when
	// nobody waits (as Info.QueuePriorities).
	QueuePriorities []int
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
