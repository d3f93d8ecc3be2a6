package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// secret is the HS256 key of the gateways these tests start.
const secret = "lockctl-test-secret-at-least-32-bytes"

// gateway is one app.Start in this process, on a free loopback port.
type gateway struct {
	URL  string
	logs *gatewaytest.Buffer
	gw   *app.Gateway
}

// startGateway runs the gateway with the test secret and extra flags (e.g.
// --redis-url), and stops it when the test ends.
func startGateway(t *testing.T, args ...string) *gateway {
	t.Helper()
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	g := gatewaytest.Start(t, env, append([]string{"--log-level", "warn"}, args...)...)
	return &gateway{URL: g.URL, logs: g.Logs, gw: g.Gateway}
}

// stop shuts the gateway down as SIGTERM would and waits for it. It is safe
// to call more than once.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if err := g.gw.Stop(); err != nil {
		t.Errorf("gateway: %v", err)
	}
}

// jwtFor signs a token with key: sub "tester", the given namespace globs,
// an hour to live.
func jwtFor(t *testing.T, key string, ns ...string) string {
	t.Helper()
	if len(ns) == 0 {
		ns = []string{"*"}
	}
	c := jwt.MapClaims{"sub": "tester", "ns": ns, "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(key))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

// result is what one lockctl run ended with.
type result struct {
	code           int
	stdout, stderr string
}

// lockctl runs lockctl in this process against gw with a valid token,
// unless env overrides LOCKGATE_URL or LOCKGATE_TOKEN.
func lockctl(t *testing.T, gw *gateway, env map[string]string, args ...string) result {
	t.Helper()
	select {
	case r := <-lockctlAsync(t, gw, env, args...):
		return r
	case <-time.After(60 * time.Second):
		t.Fatalf("lockctl %s did not return within 60s", strings.Join(args, " "))
		return result{}
	}
}

// lockctlAsync is lockctl on another goroutine.
func lockctlAsync(t *testing.T, gw *gateway, env map[string]string, args ...string) <-chan result {
	t.Helper()
	vars := map[string]string{"LOCKGATE_TOKEN": jwtFor(t, secret)}
	if gw != nil {
		vars["LOCKGATE_URL"] = gw.URL
	}
	for k, v := range env {
		vars[k] = v
	}
	got := make(chan result, 1)
	go func() {
		var stdout, stderr gatewaytest.Buffer
		code := run(t.Context(), append([]string{"lockctl"}, args...),
			func(k string) string { return vars[k] }, strings.NewReader(""), &stdout, &stderr)
		got <- result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	return got
}

// want fails the test unless r ended with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code: got %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// waitFile polls until path exists and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 20s", filepath.Base(path))
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// touch creates path.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// closedURL is a loopback URL where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// lockctlBinary builds lockctl once per test run, for tests that must
// signal a lockctl process of its own.
func lockctlBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "lockctl-test-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "lockctl")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// waitForWaiters polls the gateway's metrics until n acquirers wait.
func waitForWaiters(t *testing.T, gw *gateway, n int) {
	t.Helper()
	want := "lockgate_active_waiters " + strconv.Itoa(n) + "\n"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(gw.URL + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d waiters within 20s", n)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}
