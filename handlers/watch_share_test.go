package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks/embedded"
)

func subjectToken(t *testing.T, sub string) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestWatchersPerSubject: by default one subject holds at most a tenth of
// --max-watchers; the next of its watches is a 429 too_many_requests,
// while another subject still watches.
func TestWatchersPerSubject(t *testing.T) {
	b := embedded.New(embedded.Options{History: 10})
	t.Cleanup(func() { b.Close() })
	_, h := newTestHandler(t, Config{Backend: b, History: 10, MaxWatchers: 20})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	open := func(tok string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/locks/ns/shared", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	greedy := subjectToken(t, "greedy")
	for i := range 2 {
		if resp := open(greedy); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of greedy: got %d, want 200", i+1, resp.StatusCode)
		}
	}
	resp := open(greedy)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("stream 3 of greedy (a tenth of 20 is 2): got %d, want 429 too_many_requests", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	var p struct{ Code string }
	json.Unmarshal(body, &p)
	if resp.StatusCode != http.StatusTooManyRequests || p.Code != "too_many_requests" {
		t.Fatalf("stream 3 of greedy (a tenth of 20 is 2): got %d %s, want 429 too_many_requests", resp.StatusCode, body)
	}
	if resp := open(subjectToken(t, "other")); resp.StatusCode != http.StatusOK {
		t.Fatalf("another subject's stream: got %d, want 200", resp.StatusCode)
	}
}
