package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestMaxWaiters: past MaxWaiters, one more waiting acquirer gets 429
// too_many_requests with Retry-After and changes nothing; acquirers that
// do not wait are not counted; a freed slot is usable again.
func TestMaxWaiters(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	s, h := newTestHandler(t, Config{Backend: mem, MaxWaiters: 2})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	auth := "Bearer " + testToken(t)
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/locks/cap/x", strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		return http.DefaultClient.Do(req)
	}
	resp, err := post(t.Context(), `{"ttl_ms":60000}`)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("first acquire: %v %v", resp, err)
	}
	resp.Body.Close()
	var holder locks.Info
	if holder, err = mem.Inspect(t.Context(), locks.Key{Namespace: "cap", Name: "x"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			if resp, err := post(ctx, `{"wait_ms":60000}`); err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, func() bool { return s.waiting.Load() == 2 })

	resp, err = post(t.Context(), `{"wait_ms":60000}`)
	if err != nil {
		t.Fatal(err)
	}
	var p Problem
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || p.Code != ProblemCodeTooManyRequests {
		t.Fatalf("third waiter: got %d %q, want 429 too_many_requests", resp.StatusCode, p.Code)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Fatal("429 without Retry-After")
	}
	resp, err = post(t.Context(), ``)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("acquire without wait at the cap: got %d, want 409", resp.StatusCode)
	}
	if info, err := mem.Inspect(t.Context(), locks.Key{Namespace: "cap", Name: "x"}); err != nil || info.FencingToken != holder.FencingToken {
		t.Fatalf("holder changed: got %+v, %v; want fencing token %d", info, err, holder.FencingToken)
	}

	cancel()
	<-done
	<-done
	waitFor(t, func() bool { return s.waiting.Load() == 0 })
	resp, err = post(t.Context(), `{"wait_ms":1}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("waiter after the storm: got %d, want 409 (a slot was free)", resp.StatusCode)
	}
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond) // poll interval
	}
}
