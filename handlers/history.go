package handlers

import (
	"context"

	"github.com/lockgate/lockgate/locks"
)

// LockHistory implements StrictServerInterface: the lock's last events,
// newest first, as the backend recorded them.
func (s *Server) LockHistory(ctx context.Context, req LockHistoryRequestObject) (LockHistoryResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	events, err := s.cfg.Backend.History(ctx, key)
	if err != nil {
		return nil, err
	}
	out := LockHistory200JSONResponse{Lock: key.String(), Limit: s.cfg.History, Events: make([]LockEvent, len(events))}
	for i, e := range events {
		out.Events[i] = lockEvent(e)
	}
	return out, nil
}

// lockEvent is an event as the API shows it.
func lockEvent(e locks.Event) LockEvent {
	out := LockEvent{
		Event:        LockEventEvent(e.Kind),
		At:           timestamp(e.At),
		Subject:      e.Subject,
		Owner:        e.Owner,
		FencingToken: e.FencingToken,
		Value:        valueOf(e.Value),
	}
	if e.By != "" {
		out.By = &e.By
	}
	if e.Index > 0 {
		out.Index = &e.Index
	}
	if e.Session != "" {
		out.Session = &e.Session
	}
	return out
}
