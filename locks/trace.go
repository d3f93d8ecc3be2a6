package locks

import (
	"context"
	"time"
)

// ReleaseTrace hears what a Release or ReleasePermit did beyond what it
// returns, as net/http/httptrace does for a client request: put one in the
// context of a call with WithReleaseTrace. Its functions may be nil, and
// must be quick; they run on the caller's goroutine before the call
// returns.
type ReleaseTrace struct {
	// Ended is called when the release ended a lock's grant (its last
	// hold), or a permit, with how long it was held: from the grant to its
	// release, on the backend's clock.
	Ended func(held time.Duration)
}

type releaseTraceKey struct{}

// WithReleaseTrace returns ctx with trace, for Release and ReleasePermit to
// call.
func WithReleaseTrace(ctx context.Context, trace *ReleaseTrace) context.Context {
	return context.WithValue(ctx, releaseTraceKey{}, trace)
}

// releaseEnded tells the trace in ctx, if any, that a grant held for held
// ended.
func releaseEnded(ctx context.Context, held time.Duration) {
	if tr, _ := ctx.Value(releaseTraceKey{}).(*ReleaseTrace); tr != nil && tr.Ended != nil {
		tr.Ended(max(held, 0))
	}
}
