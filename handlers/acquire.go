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

// grantor is one kind of grant the gateway hands out (a lock, a
// semaphore's permit): its name, and how to give one back. What to ask the
// engine for is the call's (locks.Obtain).
type grantor interface {
	// noun names the kind in errors and logs: "lock", "semaphore".
	noun() string
	release(ctx context.Context, key locks.Key, token string) error
}

// lockGrantor hands out locks.
type lockGrantor struct{ backend locks.Backend }

func (lockGrantor) noun() string { return "lock" }

func (g lockGrantor) release(ctx context.Context, key locks.Key, token string) error {
	_, err := g.backend.Release(ctx, key, token)
	return err
}

// permitGrantor hands out semaphores' permits.
type permitGrantor struct{ backend locks.Backend }

func (permitGrantor) noun() string { return "semaphore" }

func (g permitGrantor) release(ctx context.Context, key locks.Key, token string) error {
	_, err := g.backend.ReleasePermit(ctx, key, token)
	return err
}

// grantCall is one request for a grant: the engine's call, which grantor
// gives its grant back, and where to count its outcome.
type grantCall struct {
	grantor  grantor // s.locks or s.permits: set once, so a call allocates none
	call     locks.Call
	outcomes *outcomeVec
	signed   bool // the grant's answer carries a signed grant (see signs)
}

// keep keeps a grant whose caller left before receiving it, instead of
// releasing it: a retry with its Idempotency-Key will receive it.
func (c grantCall) keep() bool { return c.call.IdempotencyKey != "" }

// obtain makes c's call (locks.Obtain) with the gateway's rules around waiting: the
// subject's and the gateway's caps on waiters (--subject-max-waiters,
// --max-waiters), the end of waits when the gateway drains, and the
// release of a grant whose caller left before receiving it.
func (s *Server) obtain(ctx context.Context, c grantCall) (locks.Grant, error) {
	// Waits end early when the gateway shuts down; the caller then gets a
	// 503 and retries elsewhere, instead of holding up the shutdown. An
	// acquire that does not wait needs no such hook: it costs a context
	// and a registration on the gateway-wide draining context per call.
	key, wait := c.call.Key, c.call.Req.Wait
	waitCtx := ctx
	if wait > 0 {
		var cancel context.CancelCauseFunc
		waitCtx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(s.draining, func() { cancel(errDraining) })
		defer stop()
	}

	if wait > 0 {
		// The subject's share first: a subject over it is told so, even
		// when the gateway is full too.
		claims, _ := middleware.ClaimsFromContext(ctx)
		w, err := s.cfg.Subjects.StartWait(claims)
		if err != nil {
			c.outcomes.WithLabelValues(outcomeRefused).Inc()
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.grantor.noun(), key, err)
		}
		defer w.Done()
		if s.waiting.Add(1) > int64(s.cfg.MaxWaiters) {
			s.waiting.Add(-1)
			c.outcomes.WithLabelValues(outcomeRefused).Inc()
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.grantor.noun(), key, errTooManyWaiters)
		}
		defer s.waiting.Add(-1)
		s.metrics.waiters.Inc()
	}
	start := time.Now()
	if c.grantor.noun() == "semaphore" {
		s.contention.semaphoreServed(key, start)
	}
	if wait > 0 {
		s.contention.waitStarted(c.grantor.noun(), key, start)
	}
	o, err := locks.Obtain(waitCtx, s.cfg.Backend, c.call)
	grant := o.Grant
	if wait > 0 {
		end := time.Now()
		s.metrics.waiters.Dec()
		s.metrics.wait.Observe(end.Sub(start).Seconds())
		s.contention.waitEnded(c.grantor.noun(), key, end, end.Sub(start))
	}
	if err != nil {
		c.outcomes.WithLabelValues(acquireOutcome(err)).Inc()
		if ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errDraining) {
			return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.grantor.noun(), key, errDraining)
		}
		return locks.Grant{}, err
	}
	if ctx.Err() != nil {
		// The engine granted as the caller left: nobody would ever release
		// this grant, so release it now rather than let it block others
		// until its lease ends.
		s.undelivered(ctx, c, grant.Token)
		c.outcomes.WithLabelValues(outcomeCancelled).Inc()
		return locks.Grant{}, fmt.Errorf("acquire %s %s: %w", c.grantor.noun(), key, ctx.Err())
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
	if c.keep() {
		zerolog.Ctx(ctx).Info().Str(c.grantor.noun(), c.call.Key.String()).
			Msg("kept a grant whose caller left before receiving it, for a retry with its Idempotency-Key")
		return
	}
	s.giveBack(ctx, c.grantor, c.call.Key, token)
}

// giveBack frees a grant its caller never received. It runs when the
// request's context may be done, so it has its own short deadline.
func (s *Server) giveBack(ctx context.Context, g grantor, key locks.Key, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	log := zerolog.Ctx(ctx)
	if err := g.release(ctx, key, token); err != nil && !errors.Is(err, locks.ErrNotHolder) {
		log.Warn().Err(err).Str(g.noun(), key.String()).Msg("release of an undelivered grant failed; its lease will end it")
		return
	}
	log.Info().Str(g.noun(), key.String()).Msg("released a grant whose caller left before receiving it")
}
