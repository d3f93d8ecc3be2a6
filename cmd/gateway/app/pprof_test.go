package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestPprofOnLoopbackWhenAsked(t *testing.T) {
	env := map[string]string{"LOCKGATE_JWT_SECRET": "start-test-secret-at-least-32-bytes", pprofEnv: "127.0.0.1:0"}
	var logs lockedBuffer
	g, err := Start(t.Context(), startArgs, func(k string) string { return env[k] }, &logs)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer g.Stop()
	var addr string
	for line := range strings.Lines(logs.String()) {
		var l struct{ Addr, Message string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.Contains(l.Message, "pprof") {
			addr = l.Addr
		}
	}
	if addr == "" {
		t.Fatalf("no log line gives the pprof address; logs:\n%s", logs.String())
	}
	// Secrets given as flags never show: only the flags' names do.
	args := os.Args
	os.Args = []string{"gateway", "--jwt-secret", "flag-secret-at-least-32-bytes-long", "--redis-url=redis://:redis-password@h:6380", "-log-level", "debug"}
	defer func() { os.Args = args }()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatalf("GET pprof: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline: got %d, want 200", resp.StatusCode)
	}
	if strings.Contains(string(body), "flag-secret") || strings.Contains(string(body), "redis-password") || !strings.Contains(string(body), "--jwt-secret") {
		t.Errorf("GET /debug/pprof/cmdline: got %q, want the flags' names without their values", body)
	}
	// Not on the API's listener.
	resp, err = http.Get(g.URL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/cmdline on the API: got %d, want 404", resp.StatusCode)
	}
}

func TestPprofRefusesOtherAddresses(t *testing.T) {
	for _, addr := range []string{":6060", "0.0.0.0:6060", "10.0.0.1:6060", "nonsense"} {
		env := map[string]string{"LOCKGATE_JWT_SECRET": "start-test-secret-at-least-32-bytes", pprofEnv: addr}
		_, err := parseConfig(startArgs, func(k string) string { return env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), pprofEnv) {
			t.Errorf("%s=%q: got %v, want an error naming %s", pprofEnv, addr, err, pprofEnv)
		}
	}
}
