package handlers

import (
	"context"
	"strconv"

	"github.com/lockgate/lockgate/auth"
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
	claims, _ := middleware.ClaimsFromContext(ctx)
	if !claims.Administers(key.Namespace) {
		return nil, &notAdminError{namespace: key.Namespace}
	}
	if req.Body != nil && req.Body.BreakPeriodMs != nil && *req.Body.BreakPeriodMs != 0 {
		return nil, invalid("break_period_ms must be 0: only an immediate break is supported")
	}
	broken, err := s.cfg.Backend.Break(ctx, key, claims.Identity.String())
	if err != nil {
		return nil, err
	}
	return BreakLock200JSONResponse{Lock: key.String(), Broken: broken.Grants}, nil
}

// notAdminError says that the token does not administer the namespace of
// an operation that needs an administrator.
type notAdminError struct{ namespace string }

func (e *notAdminError) Error() string {
	return "forbidden: not an administrator of namespace " + e.namespace
}
func (e *notAdminError) Detail() string {
	return "breaking a lock needs an administrator of namespace " + strconv.Quote(e.namespace) +
		" (a token's ns_admin claim, or a policy rule's admin_namespaces); a holder ends its own grant with a release"
}
func (e *notAdminError) Is(target error) bool { return target == auth.ErrForbidden }
