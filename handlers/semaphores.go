package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks"
)

// Semaphores answer as locks do: the same namespace grant, the same caps
// (--max-ttl, --max-wait, and --max-waiters, which counts waiters of both),
// the same drain and cancellation rules (see obtain). Their acquire
// outcomes are counted apart, in lockgate_semaphore_acquires_total, since
// two of them (full, limit_mismatch) do not exist for locks; the waiters
// gauge and the wait and hand-off histograms count both.

// AcquireSemaphore implements StrictServerInterface.
func (s *Server) AcquireSemaphore(ctx context.Context, req AcquireSemaphoreRequestObject) (AcquireSemaphoreResponseObject, error) {
	if req.Body == nil {
		s.metrics.semAcquires.WithLabelValues(outcomeInvalid).Inc()
		return nil, invalid(`field "limit" is required`)
	}
	b := req.Body
	// The lock's rules for ttl_ms, wait_ms and owner, in one place.
	key, ar, err := s.acquireRequest(ctx, AcquireLockRequestObject{
		Namespace: req.Namespace, Name: req.Name,
		Body: &AcquireLockJSONRequestBody{TtlMs: b.TtlMs, WaitMs: b.WaitMs, Owner: b.Owner, MaxHoldMs: b.MaxHoldMs, Priority: b.Priority},
	}, permitWait)
	if err != nil {
		s.metrics.semAcquires.WithLabelValues(outcomeInvalid).Inc()
		return nil, err
	}
	sign, err := s.signs(b.Signed)
	if err != nil {
		s.metrics.semAcquires.WithLabelValues(outcomeInvalid).Inc()
		return nil, err
	}
	call := locks.Call{Key: key, Req: ar, Limit: b.Limit, Session: deref(req.Params.SessionToken)}
	if call.IdempotencyKey, err = s.idempotencyKey(call, req.Params.IdempotencyKey); err != nil {
		s.metrics.semAcquires.WithLabelValues(outcomeInvalid).Inc()
		return nil, err
	}
	c := grantCall{grantor: s.permits, call: call, outcomes: s.metrics.semAcquires, signed: sign}
	grant, err := s.obtain(ctx, c)
	if err != nil {
		return nil, err
	}
	g := &granted{s: s, ctx: ctx, c: c, grant: grant}
	semaphore := key.String()
	g.permit = SemaphoreGrant{
		Semaphore:    semaphore,
		Token:        grant.Token,
		FencingToken: grant.FencingToken,
		TtlMs:        grant.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(grant.TTL),
		ExpiresAt:    timestamp(grant.ExpiresAt),
		HoldUntil:    holdUntil(grant.HoldUntil),
		Limit:        b.Limit,
		SignedGrant:  s.signedGrant(ctx, sign, "", semaphore, grant.FencingToken, grantsig.ModePermit, grant.ExpiresAt),
	}
	return g, nil
}

// Semaphore acquire outcomes besides those of locks.
const (
	outcomeFull          = "full"           // every permit taken, and the caller did not wait or waited in vain
	outcomeLimitMismatch = "limit_mismatch" // the semaphore is in use with another limit
)

// ReleaseSemaphore implements StrictServerInterface.
func (s *Server) ReleaseSemaphore(ctx context.Context, req ReleaseSemaphoreRequestObject) (ReleaseSemaphoreResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	rel, err := s.cfg.Backend.ReleasePermit(ctx, key, req.Params.LockToken)
	s.metrics.lease.released("semaphore", rel, err)
	if err != nil {
		return nil, semaphoreDetail(err)
	}
	return ReleaseSemaphore204Response{}, nil
}

// RenewSemaphoreLease implements StrictServerInterface.
func (s *Server) RenewSemaphoreLease(ctx context.Context, req RenewSemaphoreLeaseRequestObject) (RenewSemaphoreLeaseResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	ttl, sign, err := s.renewRequest(ctx, req.Body) // ttl 0: the TTL the permit was acquired with
	if err != nil {
		return nil, err
	}
	lease, err := s.cfg.Backend.RenewPermit(ctx, key, req.Params.LockToken, ttl)
	if err != nil {
		s.metrics.lease.renewFailed("semaphore", err)
		return nil, semaphoreDetail(err)
	}
	semaphore := key.String()
	return RenewSemaphoreLease200JSONResponse{
		Semaphore:    semaphore,
		FencingToken: lease.FencingToken,
		TtlMs:        lease.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(lease.TTL),
		ExpiresAt:    timestamp(lease.ExpiresAt),
		HoldUntil:    holdUntil(lease.HoldUntil),
		SignedGrant:  s.signedGrant(ctx, sign, "", semaphore, lease.FencingToken, grantsig.ModePermit, lease.ExpiresAt),
	}, nil
}

// InspectSemaphore implements StrictServerInterface: the holders with the
// semaphore's index, or, with index or wait, a long-poll (#39), as
// InspectLock answers them for a lock.
func (s *Server) InspectSemaphore(ctx context.Context, req InspectSemaphoreRequestObject) (InspectSemaphoreResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if p := req.Params; p.Index != nil || p.Wait != nil {
		w, err := s.startWatch(ctx, key, watchParams{index: p.Index, wait: p.Wait}, false)
		if err != nil {
			return nil, err
		}
		return semaphoreWatch{w}, nil
	}
	info, err := s.cfg.Backend.InspectSemaphore(ctx, key)
	var free *locks.NotHeldError
	if errors.As(err, &free) {
		return freshSemaphore{index: free.Index, free: semaphoreDetail(err)}, nil
	}
	if err != nil {
		return nil, err
	}
	return freshSemaphore{index: info.Index, info: semaphoreInfo(key, info)}, nil
}

// semaphoreInfo describes the holders of a semaphore in use.
func semaphoreInfo(key locks.Key, info locks.SemaphoreInfo) SemaphoreInfo {
	return SemaphoreInfo{
		Semaphore:       key.String(),
		Limit:           info.Limit,
		Holders:         holdersOf(info.Holders),
		Waiters:         info.Waiters,
		QueuePriorities: queuePriorities(info.QueuePriorities),
	}
}

// freshSemaphore is a plain GET's answer, as freshInspect is a lock's.
type freshSemaphore struct {
	info  SemaphoreInfo
	index int64
	free  error
}

// VisitInspectSemaphoreResponse implements InspectSemaphoreResponseObject.
func (r freshSemaphore) VisitInspectSemaphoreResponse(w http.ResponseWriter) error {
	return writeIndexed(w, r.index, r.free, InspectSemaphore200JSONResponse{Body: r.info}.VisitInspectSemaphoreResponse)
}

// semaphoreWatch is a long-poll of a semaphore (see watch.longPoll).
type semaphoreWatch struct{ *watch }

// VisitInspectSemaphoreResponse implements InspectSemaphoreResponseObject.
func (w semaphoreWatch) VisitInspectSemaphoreResponse(rw http.ResponseWriter) error {
	defer w.done()
	return w.longPoll(rw, func(ctx context.Context, after int64) (polled, error) {
		c, err := w.s.cfg.Backend.WatchSemaphore(ctx, w.key, after)
		p := polled{index: c.Index, held: c.Held}
		if c.Held {
			p.body = semaphoreInfo(w.key, c.Info)
		}
		return p, err
	}, semaphoreDetail)
}

// ResizeSemaphore implements StrictServerInterface.
func (s *Server) ResizeSemaphore(ctx context.Context, req ResizeSemaphoreRequestObject) (ResizeSemaphoreResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if err := administer(ctx, key.Namespace, "change a semaphore's limit"); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, invalid(`field "limit" is required`)
	}
	size, err := s.cfg.Backend.ResizeSemaphore(ctx, key, req.Body.Limit)
	if err != nil {
		if errors.Is(err, locks.ErrNotHeld) {
			return nil, &semaphoreError{err, "nobody holds or waits for a permit of this semaphore: an idle semaphore keeps no limit, the next acquire's applies"}
		}
		return nil, err
	}
	return ResizeSemaphore200JSONResponse{Semaphore: key.String(), Limit: size.Limit, Held: size.Holders, Waiters: size.Waiters}, nil
}

// semaphoreError words an engine error for a semaphore, where the error
// table's details speak of a lock.
type semaphoreError struct {
	err    error
	detail string
}

func (e *semaphoreError) Error() string  { return e.err.Error() }
func (e *semaphoreError) Unwrap() error  { return e.err }
func (e *semaphoreError) Detail() string { return e.detail }

func semaphoreDetail(err error) error {
	switch {
	case errors.Is(err, locks.ErrNotHolder):
		return &semaphoreError{err, "the Lock-Token does not hold a permit of this semaphore: it was released, or its lease ended"}
	case errors.Is(err, locks.ErrNotHeld):
		return &semaphoreError{err, "nobody holds a permit of this semaphore"}
	}
	return err
}
