package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/locks"
)

func TestErrorTable(t *testing.T) {
	for name, tc := range map[string]struct {
		err        error
		status     int
		code       ProblemCode
		header     string // name of a header the response must have
		wantDetail string // part of the detail, when it comes from err
	}{
		"held":         {&locks.HeldError{RetryAfter: 1500 * time.Millisecond}, 409, ProblemCodeLockHeld, "Retry-After", "1500 ms"},
		"wrapped held": {fmt.Errorf("acquire a/b: %w", &locks.HeldError{RetryAfter: time.Second}), 409, ProblemCodeLockHeld, "Retry-After", ""},
		"not holder":   {fmt.Errorf("release a/b: %w", locks.ErrNotHolder), 409, ProblemCodeNotHolder, "", ""},
		"not held":     {fmt.Errorf("inspect a/b: %w", locks.ErrNotHeld), 404, ProblemCodeNotHeld, "", ""},
		"invalid":      {fmt.Errorf("%w: ttl must be positive", locks.ErrInvalid), 400, ProblemCodeInvalidRequest, "", "ttl must be positive"},
		"request":      {invalid("field x is bad"), 400, ProblemCodeInvalidRequest, "", "field x is bad"},
		"too large":    {errTooLarge, 413, ProblemCodePayloadTooLarge, "", "16 KiB"},
		"unauth":       {&auth.Error{Reason: "the token has expired", Presented: true}, 401, ProblemCodeUnauthorized, "WWW-Authenticate", "expired"},
		"forbidden":    {&forbiddenError{namespace: "billing"}, 403, ProblemCodeForbidden, "", `"billing"`},
		"not found":    {errNotFound, 404, ProblemCodeNotFound, "", ""},
		"method":       {errMethodNotAllowed, 405, ProblemCodeMethodNotAllowed, "", ""},
		"draining":     {errDraining, 503, ProblemCodeBackendUnavailable, "Retry-After", ""},
		"unavailable":  {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, errors.New("dial tcp 10.0.0.7:6379: i/o timeout")), 503, ProblemCodeBackendUnavailable, "Retry-After", ""},
		"refused":      {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), 503, ProblemCodeBackendUnavailable, "Retry-After", "nothing was done"},
		"timed out":    {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), 503, ProblemCodeBackendUnavailable, "Retry-After", "did not answer in time; the outcome of the call is unknown"},
		"deadline":     {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, context.DeadlineExceeded), 503, ProblemCodeBackendUnavailable, "Retry-After", "did not answer in time; the outcome of the call is unknown"},
		"not sent":     {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, fmt.Errorf("subscribe to hand-offs: %w", locks.ErrNotSent)), 503, ProblemCodeBackendUnavailable, "Retry-After", "did not answer in time; nothing was done"},
		"failed":       {fmt.Errorf("acquire a/b: %w: %w", locks.ErrUnavailable, errors.New("OOM command not allowed")), 503, ProblemCodeBackendUnavailable, "Retry-After", "failed; the outcome of the call is unknown"},
		"other":        {errors.New("password=hunter2 leaked by a library"), 500, ProblemCodeInternal, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(rec, httptest.NewRequest("GET", "/", nil), tc.err)
			if rec.Code != tc.status {
				t.Fatalf("status: got %d, want %d", rec.Code, tc.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type: got %q", ct)
			}
			if tc.header != "" && rec.Header().Get(tc.header) == "" {
				t.Fatalf("missing %s header", tc.header)
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Code != tc.code || p.Status != tc.status || p.Title == "" || p.Detail == "" || !strings.HasSuffix(p.Type, string(tc.code)) {
				t.Fatalf("problem: got %+v, want code %s", p, tc.code)
			}
			if !strings.Contains(p.Detail, tc.wantDetail) {
				t.Fatalf("detail: got %q, want it to contain %q", p.Detail, tc.wantDetail)
			}
			for _, leak := range []string{"hunter2", "10.0.0.7", "dial tcp"} {
				if strings.Contains(rec.Body.String(), leak) {
					t.Fatalf("body leaks %q: %s", leak, rec.Body)
				}
			}
		})
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want string
	}{
		{time.Millisecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{1001 * time.Millisecond, "2"},
		{0, "0"},
	} {
		h := http.Header{}
		retryAfterHeld(h, &locks.HeldError{RetryAfter: tc.left})
		if got := h.Get("Retry-After"); got != tc.want {
			t.Errorf("Retry-After for %v: got %s, want %s", tc.left, got, tc.want)
		}
	}
}

// TestCancellation: a context.Canceled is a 499 without a body when the
// caller has left, and the gateway's own 503 when it has not.
func TestCancellation(t *testing.T) {
	err := fmt.Errorf("acquire a/b: %w", context.Canceled)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("POST", "/locks/a/b", nil).WithContext(ctx), err)
	if rec.Code != statusClientClosedRequest || rec.Body.Len() != 0 {
		t.Fatalf("caller left: got %d %q, want 499 without a body", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("POST", "/locks/a/b", nil), err)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("caller still there: got %d, want 503", rec.Code)
	}
}
