package app

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// prodSecret stands for a production key left in the environment beside
// LOCKGATE_DEV=true.
const prodSecret = "prod-secret-0123456789-abcdefghij-KLMNOP"

// TestDevRefusesProductionSettings: --dev (or LOCKGATE_DEV=true) beside
// anything that looks like a deployment refuses to start, and never prints
// a token: a token it printed would be signed with the production key, or
// reachable from the network, or good on a shared Redis.
func TestDevRefusesProductionSettings(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(keyFile, []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"env secret":      {nil, map[string]string{"LOCKGATE_DEV": "true", "LOCKGATE_JWT_SECRET": prodSecret}, "--jwt-secret"},
		"flag secret":     {[]string{"--dev", "--jwt-secret", prodSecret}, nil, "--jwt-secret"},
		"public key":      {[]string{"--dev", "--jwt-public-key-file", keyFile}, nil, "--jwt-public-key-file"},
		"jwks":            {[]string{"--dev", "--jwt-jwks-url", "http://127.0.0.1:1/jwks"}, nil, "--jwt-jwks-url"},
		"policy":          {[]string{"--dev", "--policy", keyFile}, nil, "--policy"},
		"redis":           {[]string{"--dev", "--redis-url", "redis://127.0.0.1:1"}, nil, "--redis-url"},
		"all interfaces":  {[]string{"--dev", "--addr", ":0"}, nil, "loopback"},
		"any IPv4":        {[]string{"--dev", "--addr", "0.0.0.0:0"}, nil, "loopback"},
		"any IPv6":        {[]string{"--dev", "--addr", "[::]:0"}, nil, "loopback"},
		"a host name":     {[]string{"--dev", "--addr", "example.com:0"}, nil, "loopback"},
		"env address":     {nil, map[string]string{"LOCKGATE_DEV": "1", "LOCKGATE_ADDR": "0.0.0.0:8080"}, "loopback"},
		"env redis, flag": {[]string{"--dev"}, map[string]string{"LOCKGATE_REDIS_URL": "redis://127.0.0.1:1"}, "LOCKGATE_REDIS_URL"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			args := []string{"gateway"}
			if tc.env["LOCKGATE_ADDR"] == "" { // a later --addr wins
				args = append(args, "--addr", "127.0.0.1:0")
			}
			args = append(args, tc.args...)
			var out, errOut syncWriter
			err := Run(ctx, args, func(k string) string { return tc.env[k] }, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--dev") {
				t.Fatalf("got %v, want an error about --dev and %s", err, tc.want)
			}
			if strings.Contains(err.Error(), prodSecret) {
				t.Fatalf("the error quotes the secret: %v", err)
			}
			if strings.Contains(out.String()+errOut.String(), "LOCKGATE_TOKEN=") {
				t.Fatalf("it printed a token:\n%s\n%s", out.String(), errOut.String())
			}
		})
	}
}

// TestDevPrintsTokenToStderr: --dev prints its token on stderr, after a
// warning, never on stdout (a container's log); stdout has the listening
// line only. Loopback addresses are accepted.
func TestDevPrintsTokenToStderr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		t.Run(addr, func(t *testing.T) {
			if strings.HasPrefix(addr, "[::1]") && !hasIPv6Loopback() {
				t.Skip("no IPv6 loopback on this machine")
			}
			var stderr syncWriter
			g, err := Start(t.Context(), []string{"gateway", "--dev", "--addr", addr, "--log-level", "warn"}, func(string) string { return "" }, &stderr)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer g.Stop()
			var tok string
			for l := range strings.Lines(stderr.String()) {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "export LOCKGATE_TOKEN="); ok {
					tok = rest
				}
			}
			if tok == "" {
				t.Fatalf("no token on stderr:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), "WARNING") {
				t.Fatalf("no warning before the token:\n%s", stderr.String())
			}
			if _, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{}); err != nil {
				t.Fatalf("the printed token does not parse: %v", err)
			}
			req, _ := http.NewRequest("GET", g.URL+"/locks/demo/x", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("inspect with the dev token: got %d, want 404 not_held", resp.StatusCode)
			}
		})
	}
}

// TestDevStdoutIsTheListeningLineOnly runs Run directly to see all of its
// stdout.
func TestDevStdoutIsTheListeningLineOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncWriter
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"gateway", "--dev", "--addr", "127.0.0.1:0"}, func(string) string { return "" }, &out, &errOut)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errOut.String(), "LOCKGATE_TOKEN=") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no token on stderr within 30s; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], ListeningPrefix) {
		t.Fatalf("stdout: got %q, want the listening line only", out.String())
	}
}

// syncWriter collects what Run writes, for reads while it runs.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// TestDevPrintsAnAdminToken: --dev prints a second token, which
// administers every namespace: with it a break and a semaphore resize
// answer 200, where the first token gets 403. lockctl token cannot sign
// for a --dev gateway (its key is never shown), so the walk-through's
// administrator steps need it.
func TestDevPrintsAnAdminToken(t *testing.T) {
	var stderr syncWriter
	g, err := Start(t.Context(), []string{"gateway", "--dev", "--addr", "127.0.0.1:0", "--log-level", "warn"}, func(string) string { return "" }, &stderr)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer g.Stop()
	exports := map[string]string{}
	for l := range strings.Lines(stderr.String()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
			k, v, _ := strings.Cut(rest, "=")
			exports[k] = v
		}
	}
	user, admin := exports["LOCKGATE_TOKEN"], exports["LOCKGATE_ADMIN_TOKEN"]
	if user == "" || admin == "" {
		t.Fatalf("got exports %v, want LOCKGATE_TOKEN and LOCKGATE_ADMIN_TOKEN:\n%s", exports, stderr.String())
	}
	do := func(method, path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("POST", "/locks/demo/report", user, `{"ttl_ms":60000}`); st != http.StatusCreated {
		t.Fatalf("acquire: got %d, want 201", st)
	}
	if st := do("POST", "/semaphores/demo/encoder", user, `{"limit":2,"ttl_ms":60000}`); st != http.StatusCreated {
		t.Fatalf("take a permit: got %d, want 201", st)
	}
	for name, tc := range map[string]struct{ method, path, body string }{
		"break":  {"POST", "/locks/demo/report/break", ""},
		"resize": {"PUT", "/semaphores/demo/encoder/limit", `{"limit":3}`},
	} {
		if st := do(tc.method, tc.path, user, tc.body); st != http.StatusForbidden {
			t.Errorf("%s with LOCKGATE_TOKEN: got %d, want 403", name, st)
		}
		if st := do(tc.method, tc.path, admin, tc.body); st != http.StatusOK {
			t.Errorf("%s with LOCKGATE_ADMIN_TOKEN: got %d, want 200", name, st)
		}
	}
}
