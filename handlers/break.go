package handlers

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// BreakLock implements StrictServerInterface: an administrator of the
// namespace ends every grant of the lock, now or after a break period (see
// locks.Breaker).
func (s *Server) BreakLock(ctx context.Context, req BreakLockRequestObject) (BreakLockResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if err := administer(ctx, key.Namespace, "break a lock (a holder ends its own grant with a release)"); err != nil {
		return nil, err
	}
	claims, _ := middleware.ClaimsFromContext(ctx)
	var period time.Duration
	if req.Body != nil && req.Body.BreakPeriodMs != nil {
		ms := *req.Body.BreakPeriodMs
		if ms < 0 {
			return nil, invalid("break_period_ms must be 0 or more")
		}
		// No lease is longer than the max TTL, so neither is a period:
		// a longer one would end at the lease's end all the same.
		period = time.Duration(min(ms, s.cfg.MaxTTL.Milliseconds())) * time.Millisecond
	}
	broken, err := s.cfg.Backend.Break(ctx, key, claims.Identity.String(), period)
	if err != nil {
		return nil, err
	}
	return BreakLock200JSONResponse{Lock: key.String(), Broken: broken.Grants, BreakPeriodMs: broken.Left.Milliseconds()}, nil
}
