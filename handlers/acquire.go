package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// grantCall is one kind of grant the gateway hands out (a lock, a
// semaphore's permit): how to ask the engine for it, how to give it back,
// and how to count the outcome.
type grantCall struct {
	kind string // for errors and logs: "lock", "semaphore"
	key  locks.Key
	wait time.Duration
	// req, limit and idemKey are what acquire asks for: limit is a
	// semaphore's, idemKey the call's Idempotency-Key or "".
	req     locks.AcquireRequest
	limit   int
	idemKey string
	// acquire and release are methods of Server, such as
	// (*Server).acquireLock: functions that capture nothing cost no
	// allocation per call, as closures over the request did.
	acquire  func(s *Server, ctx context.Context, c grantCall) (locks.Grant, error)
	release  func(s *Server, ctx context.Context, c grantCall, token string) error
	outcomes *outcomeVec
	outcome  func(err error) string
	// keep keeps a grant whose caller left before receiving it, instead of
	// releasing it: a retry with its Idempotency-Key will receive it.
	keep bool
}

// obtain runs c.acquire with the gateway's rules around waiting: the
// subject's and the gateway's caps on waiters (--subject-max-waiters,
// --max-waiters), the end of waits when the gateway drains, and the
// release of a grant whose caller left before receiving it.
func (s *Server) obtain(ctx context.Context, c grantCall) (locks.Grant, error) {
	// Waits end early when the gateway shuts down; the caller then gets a
	// 503 and retries elsewhere, instead of holding up the shutdown. An
	// acquire that does not wait needs no such hook: it costs a context
	// and a registration on the gateway-wide draining context per call.
	waitCtx := ctx
	if c.wait > 0 {
		var cancel context.CancelCauseFunc
		waitCtx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(s.draining, func() { cancel(errDraining) })
		defer stop()
	}

	if c.wait > 0 {
		// The subject's share first: a subject over it is told so, even
		// when the gateway is full too.
		claims, _ := middleware.ClaimsFromContext(ctx)
		w, err := s.cfg.Subjects.StartWait(claims)
		if err != nil {
			c.outcomes.WithLabelValues(outcomeRefused).Inc()
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.kind, c.key, err)
		}
		defer w.Done()
		if s.waiting.Add(1) > int64(s.cfg.MaxWaiters) {
			s.waiting.Add(-1)
			c.outcomes.WithLabelValues(outcomeRefused).Inc()
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.kind, c.key, errTooManyWaiters)
		}
		defer s.waiting.Add(-1)
		s.metrics.waiters.Inc()
	}
	start := time.Now()
	grant, err := c.acquire(s, waitCtx, c)
	if c.wait > 0 {
		s.metrics.waiters.Dec()
		s.metrics.wait.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		c.outcomes.WithLabelValues(c.outcome(err)).Inc()
		if ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errDraining) {
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.kind, c.key, errDraining)
		}
		return locks.Grant{}, err
	}
	if ctx.Err() != nil {
		// The engine granted as the caller left: nobody would ever release
		// this grant, so release it now rather than let it block others
		// until its lease ends.
		s.undelivered(ctx, c, grant.Token)
		c.outcomes.WithLabelValues(outcomeCancelled).Inc()
		return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.kind, c.key, ctx.Err())
	}
	if grant.Replayed {
		c.outcomes.WithLabelValues(outcomeReplayed).Inc()
		return grant, nil
	}
	c.outcomes.granted.Inc()
	if grant.HandoffDelay > 0 {
		s.metrics.handoff.Observe(grant.HandoffDelay.Seconds())
	}
	return grant, nil
}

// undelivered disposes of a grant whose caller left before receiving it:
// it is released, unless a retry with the call's Idempotency-Key can still
// receive it.
func (s *Server) undelivered(ctx context.Context, c grantCall, token string) {
	if c.keep {
		zerolog.Ctx(ctx).Info().Str(c.kind, c.key.String()).
			Msg("kept a grant whose caller left before receiving it, for a retry with its Idempotency-Key")
		return
	}
	s.giveBack(ctx, c, token)
}

// giveBack frees a grant its caller never received. It runs when the
// request's context may be done, so it has its own short deadline.
func (s *Server) giveBack(ctx context.Context, c grantCall, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	log := zerolog.Ctx(ctx)
	if err := c.release(s, ctx, c, token); err != nil && !errors.Is(err, locks.ErrNotHolder) {
		log.Warn().Err(err).Str(c.kind, c.key.String()).Msg("release of an undelivered grant failed; its lease will end it")
		return
	}
	log.Info().Str(c.kind, c.key.String()).Msg("released a grant whose caller left before receiving it")
}
