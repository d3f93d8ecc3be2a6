package handlers

import (
	"context"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// BreakLock implements StrictServerInterface: an administrator of the
// namespace ends every grant of the lock (see locks.Breaker).
func (s *Server) BreakLock(ctx context.Context, req BreakLockRequestObject) (BreakLockResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if err := administer(ctx, key.Namespace, "break a lock (a holder ends its own grant with a release)"); err != nil {
		return nil, err
	}
	claims, _ := middleware.ClaimsFromContext(ctx)
	if req.Body != nil && req.Body.BreakPeriodMs != nil && *req.Body.BreakPeriodMs != 0 {
		return nil, invalid("break_period_ms must be 0: only an immediate break is supported")
	}
	broken, err := s.cfg.Backend.Break(ctx, key, claims.Identity.String())
	if err != nil {
		return nil, err
	}
	return BreakLock200JSONResponse{Lock: key.String(), Broken: broken.Grants}, nil
}
