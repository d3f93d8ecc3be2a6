package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWatch: watch prints each event of the lock as it happens, with its
// index, an expiry included, never a token, and exits after --count.
func TestWatch(t *testing.T) {
	gw := startGateway(t, "--history", "10")
	watching := lockctlAsync(t, gw, nil, "watch", "cmds/watched", "--count", "4")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(metrics(t, gw), "lockgate_active_watchers 1") {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not start within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cmds/watched", "--ttl", "1m", "--value", "v1").want(t, exitOK).stdout)
	lockctl(t, gw, nil, "release", "cmds/watched", "--token", tok).want(t, exitOK)
	lockctl(t, gw, nil, "acquire", "cmds/watched", "--ttl", "100ms").want(t, exitOK)
	r := (<-watching).want(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []string{"acquired", "released", "acquired", "expired"}
	if len(lines) != len(want) {
		t.Fatalf("watch printed %q, want %d lines", r.stdout, len(want))
	}
	// The history's first event is numbered from the clock (see
	// locks.Watcher), each next one more.
	var first int64
	fmt.Sscan(lines[0], &first)
	for i, w := range want {
		if w := fmt.Sprintf("%d %s ", first+int64(i), w); first == 0 || !strings.HasPrefix(lines[i], w) {
			t.Fatalf("line %d: got %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], `value "v1"`) || strings.Contains(r.stdout, tok) {
		t.Fatalf("watch printed %q: want the value, never the token", r.stdout)
	}
}

// metrics returns the gateway's /metrics.
func metrics(t *testing.T, gw *gateway) string {
	t.Helper()
	resp, err := http.Get(gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
