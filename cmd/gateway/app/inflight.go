package app

import (
	"context"
	"net/http"
	"sync"
)

// inflight counts the handlers running, so that shutdown can wait for them
// before it closes the backend. http.Server.Shutdown waits for them only
// until its deadline, and Close not at all: a handler whose connection was
// closed may still be in a backend call (the engine lets a call run to its
// end rather than leave its outcome unknown), then release an undelivered
// grant. Closing the backend under it would race its background clean-ups.
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{} // closed once closing and no handler runs
}

func newInflight() *inflight { return &inflight{idle: make(chan struct{})} }

// wrap counts h's calls. A request that starts once wait has been called
// is aborted: the server is closed, nobody reads the answer, and the
// backend may be closed.
func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.enter() {
			panic(http.ErrAbortHandler)
		}
		defer f.leave()
		h.ServeHTTP(w, r)
	})
}

func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.n++
	return true
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.closing && f.n == 0 {
		close(f.idle)
	}
}

// wait turns new handlers away and waits for the running ones to return,
// until ctx ends. It returns how many still run.
func (f *inflight) wait(ctx context.Context) int {
	f.mu.Lock()
	if !f.closing {
		f.closing = true
		if f.n == 0 {
			close(f.idle)
		}
	}
	f.mu.Unlock()
	select {
	case <-f.idle:
		return 0
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.n
	}
}
