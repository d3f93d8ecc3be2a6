package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// keeper renews a lease when the gateway says to (renew_after_ms, a third
// of its TTL) for as long as run's command runs.
type keeper struct {
	// what names what it keeps, in messages: a lock, or a session.
	what string
	// renew renews the lease, and returns an error that matches errGone
	// when the gateway says it is no longer held.
	renew func(ctx context.Context) (lease, error)
	ttl   time.Duration
	// interval is the time from a lease's start to its renewal.
	interval time.Duration
	stderr   io.Writer
	// deadline is the earliest moment the lease may end: the last
	// successful renewal's send time plus the TTL. The gateway starts the
	// lease when the call arrives, later than it was sent, so the real end
	// is never before this.
	deadline time.Time
}

// keep renews until ctx is done, and returns nil then. It returns an error
// wrapping errLeaseLost as soon as the lease is gone or may be: the gateway
// says the token no longer holds the lock, or renewals kept failing until
// the deadline passed.
func (k *keeper) keep(ctx context.Context) error {
	interval := k.interval
	// The first renewal comes an interval after the lease began, or at
	// once if a long server-side wait ate that.
	next := time.Until(k.deadline.Add(-k.ttl + interval))
	for {
		t := time.NewTimer(max(next, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		sent := time.Now()
		// Wait for an answer until the lease may end, and a little past it
		// so that a slow success still counts.
		end := k.deadline
		if end.Before(sent) {
			end = sent
		}
		callCtx, cancel := context.WithDeadline(ctx, end.Add(interval))
		ls, err := k.renew(callCtx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err == nil:
			k.ttl = time.Duration(ls.TTLMs) * time.Millisecond
			interval = renewAfter(ls.TTLMs, ls.RenewAfterMs)
			k.deadline = sent.Add(k.ttl)
			next = interval
		case errors.Is(err, errGone):
			return fmt.Errorf("%w: the gateway says this lockctl no longer holds %s", errLeaseLost, k.what)
		case !time.Now().Before(k.deadline):
			return fmt.Errorf("%w: renewals of %s failed until the lease may have ended (last: %v)", errLeaseLost, k.what, err)
		default:
			// Retry soon, and try once more right at the deadline.
			left := time.Until(k.deadline)
			next = min(max(interval/4, time.Millisecond), left)
			fmt.Fprintf(k.stderr, "lockctl: renew %s: %v; retrying, the lease may end in %s\n",
				k.what, err, left.Round(time.Millisecond))
		}
	}
}

// errGone is a renewal's answer that what it renews is no longer held.
var errGone = errors.New("no longer held")

// lockRenewer renews the grant token holds of l.
func lockRenewer(cl *client, l lockName, token string) func(context.Context) (lease, error) {
	return func(ctx context.Context) (lease, error) {
		ls, err := cl.renew(ctx, l, token, 0)
		if isCode(err, "not_holder") {
			return ls, fmt.Errorf("%w (%w)", errGone, err)
		}
		return ls, err
	}
}
