package handlers

import (
	"context"
	"errors"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// defaultListLimit is a page's length when the caller gives no limit; the
// spec's maximum bounds the limit a caller may give.
const defaultListLimit = 100

// ListLocks implements StrictServerInterface.
func (s *Server) ListLocks(ctx context.Context, req ListLocksRequestObject) (ListLocksResponseObject, error) {
	if !locks.ValidNamespace(req.Namespace) {
		return nil, invalid("a namespace is " + locks.NamespaceRule)
	}
	limit, cursor := defaultListLimit, ""
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	if req.Params.Cursor != nil {
		cursor = *req.Params.Cursor
	}
	page, err := s.cfg.Backend.List(ctx, req.Namespace, cursor, limit)
	if errors.Is(err, locks.ErrInvalid) { // the namespace and limit are checked: the cursor
		return nil, invalid("query parameter \"cursor\" is not a next_cursor a listing returned")
	}
	if err != nil {
		return nil, err
	}
	// The request paid for the page's read of the index; each lock it
	// looked at cost about what a GET of it costs.
	claims, _ := middleware.ClaimsFromContext(ctx)
	s.cfg.Subjects.Charge(claims, page.Examined)
	out := ListLocks200JSONResponse{Locks: make([]ListedLock, len(page.Locks))}
	for i, l := range page.Locks {
		out.Locks[i] = ListedLock{
			Name:         l.Key.Name,
			Lock:         l.Key.String(),
			Held:         true,
			FencingToken: l.FencingToken,
			TtlMs:        l.TTL.Milliseconds(),
			ExpiresAt:    timestamp(l.ExpiresAt),
			AcquiredAt:   timestamp(l.AcquiredAt),
			Subject:      l.Subject,
			Owner:        l.Owner,
			Waiters:      l.Waiters,
			Holds:        &page.Locks[i].Holds,
			Mode:         ListedLockMode(l.Mode.String()),
			Holders:      holdersOf(l.Holders),
			HoldersTotal: l.HoldersTotal,
			Value:        valueOf(l.Value),
		}
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return out, nil
}
