package handlers

import (
	"context"

	"github.com/lockgate/lockgate/locks"
)

// SetLockValue implements StrictServerInterface: the holder changes its
// grant's value. The value is never logged, nor put in an error: the
// engine's errors name the lock, not the value.
func (s *Server) SetLockValue(ctx context.Context, req SetLockValueRequestObject) (SetLockValueResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, invalid("a body {\"value\": \"...\"} is required")
	}
	fence, err := s.cfg.Backend.SetValue(ctx, key, req.Params.LockToken, req.Body.Value)
	if err != nil {
		return nil, err
	}
	return SetLockValue200JSONResponse{Lock: key.String(), FencingToken: fence}, nil
}

// valueOf is v as the API shows it: absent when empty.
func valueOf(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
