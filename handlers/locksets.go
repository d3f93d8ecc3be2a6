package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// Lock sets: up to locks.MaxSetLocks locks taken in one call, all or
// none (see locks.LockSets). A set is not one namespace: every lock's
// namespace must be granted by the token, as each acquire of it would be.

// setKeys parses the set's locks ("namespace/name,...") and checks that
// the token grants each namespace: the first refused is the 403.
func setKeys(ctx context.Context, list SetLockList) ([]locks.Key, error) {
	claims, _ := middleware.ClaimsFromContext(ctx)
	names := strings.Split(list, ",")
	keys := make([]locks.Key, len(names))
	for i, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		k, err := locks.ParseKey(ns, name)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	if err := locks.CheckSet(keys); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !claims.Allows(k.Namespace) {
			return nil, &forbiddenError{namespace: k.Namespace, claims: claims}
		}
	}
	return keys, nil
}

// AcquireLockSet implements StrictServerInterface.
func (s *Server) AcquireLockSet(ctx context.Context, req AcquireLockSetRequestObject) (AcquireLockSetResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, invalid(`field "locks" is required`)
	}
	keys, err := setKeys(ctx, b.Locks)
	if err != nil {
		return nil, err
	}
	sign, err := s.signs(b.Signed)
	if err != nil {
		return nil, err
	}
	ar := locks.AcquireRequest{TTL: min(s.cfg.DefaultTTL, s.maxTTL(ctx)), Subject: subjectOf(ctx)}
	if b.TtlMs != nil {
		if ar.TTL, err = s.ttl(ctx, *b.TtlMs); err != nil {
			return nil, err
		}
	}
	if b.WaitMs != nil {
		// --max-wait, without the hint of a ticket: a set has none
		if ar.Wait, err = s.wait(*b.WaitMs, permitWait); err != nil {
			return nil, err
		}
	}
	if b.Owner != nil {
		ar.Owner = *b.Owner
	}
	if ar.Priority, err = priority(b.Priority); err != nil {
		return nil, err
	}
	if err := s.capHold(ctx, b.TtlMs, b.MaxHoldMs, &ar); err != nil {
		return nil, err
	}
	g, err := s.acquireSet(ctx, keys, ar)
	if err != nil {
		return nil, err
	}
	out := AcquireLockSet201JSONResponse{Token: g.Token, Locks: s.setLeases(ctx, g.Locks, sign),
		TtlMs: g.TTL.Milliseconds(), RenewAfterMs: renewAfterMs(g.TTL), ExpiresAt: timestamp(g.ExpiresAt)}
	return out, nil
}

// acquireSet runs the set's acquire with the gateway's rules around
// waiting, as obtain does for one grant: the subject's and the gateway's
// caps on waiters, the end of waits when the gateway drains, and the
// release of a set whose caller left before receiving it.
func (s *Server) acquireSet(ctx context.Context, keys []locks.Key, ar locks.AcquireRequest) (locks.SetGrant, error) {
	waitCtx := ctx
	if ar.Wait > 0 {
		var cancel context.CancelCauseFunc
		waitCtx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(s.draining, func() { cancel(errDraining) })
		defer stop()
		claims, _ := middleware.ClaimsFromContext(ctx)
		w, err := s.cfg.Subjects.StartWait(claims)
		if err != nil {
			return locks.SetGrant{}, fmt.Errorf("acquire set: %w", err)
		}
		defer w.Done()
		if s.waiting.Add(1) > int64(s.cfg.MaxWaiters) {
			s.waiting.Add(-1)
			return locks.SetGrant{}, fmt.Errorf("acquire set: %w", errTooManyWaiters)
		}
		defer s.waiting.Add(-1)
		s.metrics.waiters.Inc()
		defer s.metrics.waiters.Dec()
	}
	g, err := s.cfg.Backend.AcquireSet(waitCtx, keys, ar)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errDraining) {
			return locks.SetGrant{}, fmt.Errorf("acquire set: %w", errDraining)
		}
		return locks.SetGrant{}, err
	}
	if ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
		defer cancel()
		if _, err := s.cfg.Backend.ReleaseSet(rctx, keys, g.Token); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Int("locks", len(keys)).Msg("release of an undelivered lock set failed; its leases will end it")
		}
		return locks.SetGrant{}, fmt.Errorf("acquire set: %w", ctx.Err())
	}
	return g, nil
}

// setLeases describes each lock of a set, signed when sign.
func (s *Server) setLeases(ctx context.Context, ls []locks.SetLock, sign bool) []Lease {
	out := make([]Lease, len(ls))
	for i, l := range ls {
		lock := l.Key.String()
		out[i] = Lease{Lock: lock, FencingToken: l.FencingToken, TtlMs: l.TTL.Milliseconds(),
			RenewAfterMs: renewAfterMs(l.TTL), ExpiresAt: timestamp(l.ExpiresAt), HoldUntil: holdUntil(l.HoldUntil),
			SignedGrant: s.signedGrant(ctx, sign, lock, "", l.FencingToken, grantsig.ModeExclusive, l.ExpiresAt)}
	}
	return out
}

// RenewLockSet implements StrictServerInterface.
func (s *Server) RenewLockSet(ctx context.Context, req RenewLockSetRequestObject) (RenewLockSetResponseObject, error) {
	keys, err := setKeys(ctx, req.Params.Locks)
	if err != nil {
		return nil, err
	}
	ttl, sign, err := s.renewRequest(ctx, req.Body) // ttl 0: the set's TTL
	if err != nil {
		return nil, err
	}
	renewed, err := s.cfg.Backend.RenewSet(ctx, keys, req.Params.LockToken, ttl)
	if err != nil {
		return nil, err
	}
	first := renewed[0].Lease
	for _, l := range renewed[1:] {
		if l.ExpiresAt.Before(first.ExpiresAt) {
			first = l.Lease
		}
	}
	return RenewLockSet200JSONResponse{Locks: s.setLeases(ctx, renewed, sign), TtlMs: first.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(first.TTL), ExpiresAt: timestamp(first.ExpiresAt)}, nil
}

// ReleaseLockSet implements StrictServerInterface.
func (s *Server) ReleaseLockSet(ctx context.Context, req ReleaseLockSetRequestObject) (ReleaseLockSetResponseObject, error) {
	keys, err := setKeys(ctx, req.Params.Locks)
	if err != nil {
		return nil, err
	}
	rel, err := s.cfg.Backend.ReleaseSet(ctx, keys, req.Params.LockToken)
	if err != nil {
		return nil, err
	}
	out := ReleaseLockSet200JSONResponse{Released: make([]string, len(rel.Released)), Gone: make([]string, len(rel.Gone))}
	for i, k := range rel.Released {
		out.Released[i] = k.String()
	}
	for i, k := range rel.Gone {
		out.Gone[i] = k.String()
	}
	return out, nil
}
