package handlers

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// failingWatcher is a backend whose watches fail as a Redis call that ran
// past its bound does: unavailable, and (the bound being a context's
// deadline) context.DeadlineExceeded as well. The first ok watches answer.
type failingWatcher struct {
	*embedded.Backend
	ok    int32
	calls atomic.Int32
}

func (f *failingWatcher) Watch(ctx context.Context, key locks.Key, after int64) (locks.Change, error) {
	if f.calls.Add(1) <= f.ok {
		return locks.Change{Index: 5}, nil
	}
	return locks.Change{}, fmt.Errorf("watch %s: %w: %w", key, locks.ErrUnavailable, context.DeadlineExceeded)
}

// TestWatchBackendTimeout: a watch whose backend call timed out is not a
// wait that ran out: a long-poll answers 503 (not 404 not_held at index
// 0), and a stream ends, for its caller to resume, rather than go on from
// index 0.
func TestWatchBackendTimeout(t *testing.T) {
	b := &failingWatcher{Backend: embedded.New(embedded.Options{History: 10}), ok: 1}
	_, h := newTestHandler(t, Config{Backend: b, History: 10})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/locks/ns/x?index=0&wait=5s", nil)
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	b.calls.Store(1) // the long-poll's watch fails
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("long-poll whose backend timed out: got %d, Lockgate-Index %q; want 503", resp.StatusCode, resp.Header.Get("Lockgate-Index"))
	}

	b.calls.Store(0) // the stream's first watch answers, the next fails
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", ts.URL+"/locks/ns/x", nil)
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	req.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(lines) < 20 {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if ctx.Err() != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "event: state") {
		t.Fatalf("stream whose backend timed out after its first event: got %q (context %v); want the state event, then the end", lines, ctx.Err())
	}
}
