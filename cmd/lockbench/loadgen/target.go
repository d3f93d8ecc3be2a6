package loadgen

import (
	"context"
	"errors"
	"time"
)

// A Target is what lockbench drives: a gateway over HTTP, the lock engine
// called in-process (the floor), or anything else that takes and frees
// locks.
type Target interface {
	// NewSession returns the client of one worker for the lock name in the
	// target's namespace. Its calls run under ctx.
	NewSession(ctx context.Context, name string) Session
}

// A Session is one worker's client for one lock. It is used by one
// goroutine at a time, which lets it reuse its buffers between calls.
type Session interface {
	// Acquire takes the lock, waiting server-side up to wait when it is
	// held, and returns the owner token and the fencing token.
	Acquire(wait time.Duration) (token string, fence int64, err error)
	// Release frees the lock held with token.
	Release(token string) error
}

// CallError is a failed call, with the class the report counts it under:
// "409 lock_held" (HTTP status and problem code), "transport", or for the
// engine the problem code the gateway would have answered.
type CallError struct {
	Class string
	Err   error // may be nil
}

func (e *CallError) Error() string {
	if e.Err == nil {
		return e.Class
	}
	return e.Class + ": " + e.Err.Error()
}

func (e *CallError) Unwrap() error { return e.Err }

// ErrorClass is the report's name for err.
func ErrorClass(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "cancelled"
	}
	return "error"
}
