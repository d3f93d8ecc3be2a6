package handlers

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// Sessions: one lease for many grants of one caller (see locks.Sessions).
// A session is not per namespace; each grant is, and its acquire passes
// the gate's namespace check as any other.

// errSessionTokenMismatch answers a Session-Token that is not the token of
// the session in the path.
var errSessionTokenMismatch = errors.New("session token mismatch")

// sessionToken checks that token is the token of the session named id.
func sessionToken(id, token string) (string, error) {
	if subtle.ConstantTimeCompare([]byte(locks.SessionID(token)), []byte(id)) != 1 {
		return "", errSessionTokenMismatch
	}
	return token, nil
}

// subjectOf is the caller's identity, which owns its sessions.
func subjectOf(ctx context.Context) string {
	claims, _ := middleware.ClaimsFromContext(ctx)
	return claims.Identity.String()
}

// OpenSession implements StrictServerInterface.
func (s *Server) OpenSession(ctx context.Context, req OpenSessionRequestObject) (OpenSessionResponseObject, error) {
	if req.Body == nil {
		return nil, invalid(`field "ttl_ms" is required`)
	}
	ttl, err := s.ttl(ctx, req.Body.TtlMs)
	if err != nil {
		return nil, err
	}
	ss, err := s.cfg.Backend.OpenSession(ctx, subjectOf(ctx), ttl)
	if err != nil {
		return nil, err
	}
	return OpenSession201JSONResponse{
		Session:      ss.ID,
		SessionToken: ss.Token,
		TtlMs:        ss.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(ss.TTL),
		ExpiresAt:    timestamp(ss.ExpiresAt),
	}, nil
}

// KeepSession implements StrictServerInterface.
func (s *Server) KeepSession(ctx context.Context, req KeepSessionRequestObject) (KeepSessionResponseObject, error) {
	token, err := sessionToken(req.Session, req.Params.SessionToken)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration // 0: the session's TTL as last set
	if req.Body != nil && req.Body.TtlMs != nil {
		if ttl, err = s.ttl(ctx, *req.Body.TtlMs); err != nil {
			return nil, err
		}
	}
	kept, err := s.cfg.Backend.KeepSession(ctx, token, subjectOf(ctx), ttl)
	if err != nil {
		return nil, err
	}
	return KeepSession200JSONResponse{
		Session:      req.Session,
		TtlMs:        kept.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(kept.TTL),
		ExpiresAt:    timestamp(kept.ExpiresAt),
		Renewed:      sessionHolds(kept.Renewed),
		Gone:         sessionHolds(kept.Gone),
	}, nil
}

// EndSession implements StrictServerInterface.
func (s *Server) EndSession(ctx context.Context, req EndSessionRequestObject) (EndSessionResponseObject, error) {
	token, err := sessionToken(req.Session, req.Params.SessionToken)
	if err != nil {
		return nil, err
	}
	ended, err := s.cfg.Backend.EndSession(ctx, token, subjectOf(ctx))
	if err != nil {
		return nil, err
	}
	return EndSession200JSONResponse{Session: req.Session, Released: sessionHolds(ended.Released)}, nil
}

// DescribeSession implements StrictServerInterface.
func (s *Server) DescribeSession(ctx context.Context, req DescribeSessionRequestObject) (DescribeSessionResponseObject, error) {
	token, err := sessionToken(req.Session, req.Params.SessionToken)
	if err != nil {
		return nil, err
	}
	info, err := s.cfg.Backend.DescribeSession(ctx, token, subjectOf(ctx))
	if err != nil {
		return nil, err
	}
	return DescribeSession200JSONResponse{
		Session:      req.Session,
		TtlMs:        info.TTL.Milliseconds(),
		SessionTtlMs: info.SessionTTL.Milliseconds(),
		ExpiresAt:    timestamp(info.ExpiresAt),
		Holds:        sessionHolds(info.Holds),
	}, nil
}

// sessionHolds describes a session's grants: never an owner token.
func sessionHolds(hs []locks.SessionHold) []SessionHold {
	out := make([]SessionHold, len(hs))
	for i, h := range hs {
		out[i] = SessionHold{Kind: SessionHoldKindLock, Resource: h.Key.String()}
		if h.Semaphore {
			out[i].Kind = SessionHoldKindSemaphore
		}
		if h.FencingToken != 0 {
			out[i].FencingToken = &hs[i].FencingToken
		}
		if !h.ExpiresAt.IsZero() {
			ttl, at := h.TTL.Milliseconds(), timestamp(h.ExpiresAt)
			out[i].TtlMs, out[i].ExpiresAt = &ttl, &at
		}
		if h.Pending {
			out[i].Pending = &hs[i].Pending
		}
	}
	return out
}
