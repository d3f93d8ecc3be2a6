package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestSemaphoreProblems: the two semaphore refusals carry their data in the
// body, and semaphore_full its Retry-After, rounded up.
func TestSemaphoreProblems(t *testing.T) {
	for name, tc := range map[string]struct {
		err            error
		code           ProblemCode
		retryAfter     string
		retryAfterMs   int64
		limit          int
		detailContains string
	}{
		"full":     {fmt.Errorf("acquire a/b: %w", &locks.FullError{RetryAfter: 1500 * time.Millisecond}), ProblemCodeSemaphoreFull, "2", 1500, 0, "1500 ms"},
		"mismatch": {fmt.Errorf("acquire a/b: %w", &locks.LimitMismatchError{Limit: 3}), ProblemCodeLimitMismatch, "", 0, 3, "limit 3"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(rec, httptest.NewRequest("POST", "/", nil), tc.err)
			if rec.Code != http.StatusConflict {
				t.Fatalf("status: got %d, want 409", rec.Code)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Fatalf("Retry-After: got %q, want %q", got, tc.retryAfter)
			}
			var p struct {
				Problem
				RetryAfterMs *int64 `json:"retry_after_ms"`
				Limit        *int   `json:"limit"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Code != tc.code || !strings.Contains(p.Detail, tc.detailContains) {
				t.Fatalf("problem: got %+v, want code %s with %q in the detail", p.Problem, tc.code, tc.detailContains)
			}
			if (p.RetryAfterMs == nil) != (tc.retryAfterMs == 0) || (p.RetryAfterMs != nil && *p.RetryAfterMs != tc.retryAfterMs) {
				t.Fatalf("retry_after_ms: got %v, want %d (0: absent)", p.RetryAfterMs, tc.retryAfterMs)
			}
			if (p.Limit == nil) != (tc.limit == 0) || (p.Limit != nil && *p.Limit != tc.limit) {
				t.Fatalf("limit: got %v, want %d (0: absent)", p.Limit, tc.limit)
			}
		})
	}
}

// latePermit grants a permit only once its caller has gone.
type latePermit struct {
	*embedded.Backend
	waiting chan struct{}
	granted chan struct{}
}

func (l *latePermit) AcquirePermit(ctx context.Context, key locks.Key, req locks.SemaphoreRequest) (locks.Grant, error) {
	close(l.waiting)
	<-ctx.Done()
	req.Wait = 0
	defer close(l.granted)
	return l.Backend.AcquirePermit(context.WithoutCancel(ctx), key, req)
}

// TestPermitAfterClientLeftIsReleased: a permit granted as its caller hung
// up is given back, not left to block others until its lease ends.
func TestPermitAfterClientLeftIsReleased(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	b := &latePermit{Backend: mem, waiting: make(chan struct{}), granted: make(chan struct{})}
	_, ts := newTestServer(t, b)

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/semaphores/a/b", strings.NewReader(`{"limit":2,"ttl_ms":60000,"wait_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-b.waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: got %v, want context.Canceled", err)
	}
	select {
	case <-b.granted:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not notice the client leave within 10s")
	}
	key := locks.Key{Namespace: "a", Name: "b"}
	waitFor(t, func() bool {
		_, err := mem.InspectSemaphore(t.Context(), key)
		return errors.Is(err, locks.ErrNotHeld)
	})
}

// TestSemaphoreWaitersShareTheCaps: --max-waiters counts waiters of locks
// and semaphores together, and Drain turns semaphore waiters away too.
func TestSemaphoreWaitersShareTheCaps(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	s, h := newTestHandler(t, Config{Backend: mem, MaxWaiters: 2})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	post := func(path, body string) <-chan *http.Response {
		got := make(chan *http.Response, 1)
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken(t))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- nil
				return
			}
			resp.Body.Close()
			got <- resp
		}()
		return got
	}
	status := func(ch <-chan *http.Response) int {
		t.Helper()
		select {
		case resp := <-ch:
			if resp == nil {
				t.Fatal("request failed")
			}
			return resp.StatusCode
		case <-time.After(10 * time.Second):
			t.Fatal("no answer within 10s")
		}
		return 0
	}
	if got := status(post("/locks/cap/x", `{"ttl_ms":60000}`)); got != http.StatusCreated {
		t.Fatalf("lock: got %d, want 201", got)
	}
	if got := status(post("/semaphores/cap/x", `{"limit":1,"ttl_ms":60000}`)); got != http.StatusCreated {
		t.Fatalf("permit: got %d, want 201", got)
	}
	lockWaiter := post("/locks/cap/x", `{"wait_ms":60000}`)
	semWaiter := post("/semaphores/cap/x", `{"limit":1,"wait_ms":60000}`)
	waitFor(t, func() bool { return gaugeValue(t, s) == 2 })
	if got := status(post("/semaphores/cap/x", `{"limit":1,"wait_ms":60000}`)); got != http.StatusTooManyRequests {
		t.Fatalf("third waiter: got %d, want 429", got)
	}
	s.Drain()
	if got := status(semWaiter); got != http.StatusServiceUnavailable {
		t.Fatalf("semaphore waiter after Drain: got %d, want 503", got)
	}
	if got := status(lockWaiter); got != http.StatusServiceUnavailable {
		t.Fatalf("lock waiter after Drain: got %d, want 503", got)
	}
	waitFor(t, func() bool { return s.waiting.Load() == 0 })
}
