package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

func TestIdempotencyKeyForms(t *testing.T) {
	for name, tc := range map[string]struct{ header, key string }{
		"bare":              {"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		"quoted":            {`"abc"`, "abc"},
		"escapes":           {`"a\"b\\c"`, `a"b\c`},
		"bare with quote":   {`a"b`, `a"b`},
		"bare with slash":   {`a\b`, `a\b`},
		"longest bare":      {strings.Repeat("~", 255), strings.Repeat("~", 255)},
		"longest quoted":    {`"` + strings.Repeat(`\\`, 255) + `"`, strings.Repeat(`\`, 255)},
		"empty":             {"", ""},
		"too long":          {strings.Repeat("k", 256), ""},
		"quoted too long":   {`"` + strings.Repeat("k", 256) + `"`, ""},
		"empty quoted":      {`""`, ""},
		"lone quote":        {`"`, ""},
		"unterminated":      {`"abc`, ""},
		"bad escape":        {`"a\nb"`, ""},
		"trailing escape":   {`"a\"`, ""},
		"quote inside":      {`"a"b"`, ""},
		"space":             {"a b", ""},
		"quoted with space": {`"a b"`, ""},
		"control":           {"a\tb", ""},
		"non-ASCII":         {"clé", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := idempotencyKey(tc.header)
			if got != tc.key || (err == nil) != (tc.key != "") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.key)
			}
		})
	}
}

// FuzzIdempotencyKeyPattern: the spec's pattern (which the gate checks)
// lets through exactly the headers idempotencyKey reads.
func FuzzIdempotencyKeyPattern(f *testing.F) {
	spec, err := GetSpec()
	if err != nil {
		f.Fatal(err)
	}
	p := spec.Components.Parameters["IdempotencyKey"].Value.Schema.Value
	re := regexp.MustCompile(p.Pattern)
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\"`, `"`, `""`, "a b", `"a\nb"`, strings.Repeat("k", 255), strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		k, err := idempotencyKey(h)
		if re.MatchString(h) != (err == nil) {
			t.Fatalf("%q: pattern says %t, idempotencyKey says %v", h, re.MatchString(h), err)
		}
		if err == nil && !locks.ValidIdempotencyKey(k) {
			t.Fatalf("%q: read the invalid key %q", h, k)
		}
	})
}

// lateOnceGranter runs its first acquire with an idempotency key only once
// the caller has gone, with the caller's context, done by then: as the
// engine sees a caller that left while the grant was being made. Later
// ones go straight to memory.
type lateOnceGranter struct {
	*embedded.Backend
	first   atomic.Bool
	waiting chan struct{} // closed when the first AcquireOnce is called
	granted chan struct{} // closed when it has granted
}

func (l *lateOnceGranter) AcquireOnce(ctx context.Context, key locks.Key, req locks.AcquireRequest, k string) (locks.Grant, error) {
	if l.first.Swap(true) {
		return l.Backend.AcquireOnce(ctx, key, req, k)
	}
	close(l.waiting)
	<-ctx.Done()
	defer close(l.granted)
	return l.Backend.AcquireOnce(ctx, key, req, k)
}

// TestIdempotentGrantAfterClientLeftIsKept: unlike a grant without a key
// (TestGrantAfterClientLeftIsReleased), one the caller left before
// receiving is kept, and the caller's retry with the key receives it.
func TestIdempotentGrantAfterClientLeftIsKept(t *testing.T) {
	b := &lateOnceGranter{Backend: embedded.New(embedded.Options{}), waiting: make(chan struct{}), granted: make(chan struct{})}
	_, ts := newTestServer(t, b)
	post := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/locks/a/b", strings.NewReader(`{"ttl_ms":60000,"wait_ms":60000}`))
		req.Header.Set("Authorization", "Bearer "+testToken(t))
		req.Header.Set("Idempotency-Key", "kept")
		return http.DefaultClient.Do(req)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		resp, err := post(ctx)
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
	info, err := b.Inspect(t.Context(), locks.Key{Namespace: "a", Name: "b"})
	if err != nil {
		t.Fatalf("inspect after the caller left: %v, want the grant kept", err)
	}
	resp, err := post(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g struct {
		FencingToken int64 `json:"fencing_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil || resp.StatusCode != http.StatusCreated || g.FencingToken != info.FencingToken {
		t.Fatalf("retry: got %d, fencing token %d (%v), want 201 and the kept grant's %d", resp.StatusCode, g.FencingToken, err, info.FencingToken)
	}
}
