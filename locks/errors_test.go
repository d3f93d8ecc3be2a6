package locks

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestErrorCode: each engine error, bare, typed or wrapped, has its own
// code, and an error that is none of the engine's is internal.
func TestErrorCode(t *testing.T) {
	cases := map[string]struct {
		err  error
		want Code
	}{
		"nil":                    {nil, CodeOK},
		"held":                   {&HeldError{}, CodeHeld},
		"full":                   {fmt.Errorf("acquire: %w", &FullError{}), CodeFull},
		"limit mismatch":         {&LimitMismatchError{Limit: 3}, CodeLimitMismatch},
		"idempotency mismatch":   {ErrIdempotencyMismatch, CodeIdempotencyMismatch},
		"in progress":            {&InProgressError{}, CodeIdempotencyInProgress},
		"grant ended":            {ErrGrantEnded, CodeGrantEnded},
		"not holder":             {&NotHolderError{Reason: ReasonExpired}, CodeNotHolder},
		"ticket not found":       {ErrTicketNotFound, CodeTicketNotFound},
		"not held":               {ErrNotHeld, CodeNotHeld},
		"invalid":                {fmt.Errorf("%w: ttl", ErrInvalid), CodeInvalid},
		"unavailable":            {Unavailable("release", Key{}, errors.New("EOF")), CodeUnavailable},
		"replicas":               {Unavailable("acquire", Key{}, &ReplicaError{Acked: 0, Want: 1}), CodeUnavailable},
		"unavailable, timed out": {Unavailable("acquire", Key{}, context.DeadlineExceeded), CodeUnavailable},
		"cancelled":              {fmt.Errorf("wait: %w", context.Canceled), CodeCancelled},
		// A caller that hangs up during a Redis call: the client's error
		// is the context's, wrapped as the engine wraps every failed call.
		"unavailable, caller left": {Unavailable("acquire", Key{}, context.Canceled), CodeCancelled},
		"deadline":                 {context.DeadlineExceeded, CodeCancelled},
		"someone else's":           {errors.New("boom"), CodeInternal},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ErrorCode(c.err); got != c.want {
				t.Errorf("ErrorCode(%v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}
