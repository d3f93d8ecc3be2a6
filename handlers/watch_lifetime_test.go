package handlers

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks/embedded"
)

// tokenUntil signs a token that expires at exp (whole seconds).
func tokenUntil(t *testing.T, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "t", "ns": []string{"*"}, "exp": exp.Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// readStream reads an event stream until it ends or ctx does, and
// returns its non-empty lines and when it ended.
func readStream(t *testing.T, ctx context.Context, url, tok string) ([]string, time.Time) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: got %d", resp.StatusCode)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, ":") {
			lines = append(lines, l)
		}
	}
	return lines, time.Now()
}

// TestWatchEndsWithItsToken: an event stream opened with a token that
// expires in 3 s ends within 1 s of its exp, with an end event that says
// why; a long-poll answers by then too; and a stream ends at the
// gateway's longest lifetime whatever its token says.
func TestWatchEndsWithItsToken(t *testing.T) {
	b := embedded.New(embedded.Options{History: 10})
	t.Cleanup(func() { b.Close() })
	_, h := newTestHandler(t, Config{Backend: b, History: 10})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	t.Run("Stream", func(t *testing.T) {
		exp := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
		ctx, cancel := context.WithDeadline(t.Context(), exp.Add(10*time.Second))
		defer cancel()
		lines, ended := readStream(t, ctx, ts.URL+"/locks/ns/streamed", tokenUntil(t, exp))
		if ctx.Err() != nil || ended.Sub(exp) > time.Second {
			t.Fatalf("the stream ended %v after its token's exp (context %v), want within 1s; it sent %q", ended.Sub(exp), ctx.Err(), lines)
		}
		if n := len(lines); n < 2 || lines[n-2] != "event: end" || !strings.Contains(lines[n-1], `"reason":"token_expired"`) {
			t.Fatalf("stream %q: want it to end with an end event, reason token_expired", lines)
		}
	})
	t.Run("LongPoll", func(t *testing.T) {
		exp := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
		ctx, cancel := context.WithDeadline(t.Context(), exp.Add(10*time.Second))
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/locks/ns/polled?index=0&wait=60s", nil)
		req.Header.Set("Authorization", "Bearer "+tokenUntil(t, exp))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("long-poll: %v (want an answer within 1s of the token's exp)", err)
		}
		resp.Body.Close()
		if d := time.Since(exp); d > time.Second {
			t.Fatalf("the long-poll answered %v after its token's exp, want within 1s", d)
		}
	})
}

// TestWatchLongestLifetime: with MaxWatchLifetime, a stream ends then,
// whatever its token's exp, saying so.
func TestWatchLongestLifetime(t *testing.T) {
	b := embedded.New(embedded.Options{History: 10})
	t.Cleanup(func() { b.Close() })
	_, h := newTestHandler(t, Config{Backend: b, History: 10, MaxWatchLifetime: time.Second})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	lines, _ := readStream(t, ctx, ts.URL+"/locks/ns/lifetime", testToken(t))
	if n := len(lines); ctx.Err() != nil || n < 2 || lines[n-2] != "event: end" || !strings.Contains(lines[n-1], `"reason":"max_lifetime"`) {
		t.Fatalf("stream %q (context %v): want it to end with an end event, reason max_lifetime", lines, ctx.Err())
	}
}
