package main

import (
	"context"
	"errors"
	"time"
)

// A target is what lockbench drives: a gateway over HTTP, or the lock
// engine called in-process (the floor).
type target interface {
	// newSession returns the client of one worker for the lock name in the
	// target's namespace. Its calls run under ctx.
	newSession(ctx context.Context, name string) session
}

// A session is one worker's client for one lock. It is used by one
// goroutine at a time, which lets it reuse its buffers between calls.
type session interface {
	// acquire takes the lock, waiting server-side up to wait when it is
	// held, and returns the owner token and the fencing token.
	acquire(wait time.Duration) (token string, fence int64, err error)
	// release frees the lock held with token.
	release(token string) error
}

// callError is a failed call, with the class the report counts it under:
// "409 lock_held" (HTTP status and problem code), "transport", or for the
// engine the problem code the gateway would have answered.
type callError struct {
	class string
	err   error
}

func (e *callError) Error() string {
	if e.err == nil {
		return e.class
	}
	return e.class + ": " + e.err.Error()
}

func (e *callError) Unwrap() error { return e.err }

// errorClass is the report's name for err.
func errorClass(err error) string {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "cancelled"
	}
	return "error"
}
