package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/redistest"
)

// raw sends request bytes as they are on a new connection and returns the
// whole answer: what net/http does before routing is seen only this way.
func raw(t *testing.T, baseURL, request string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(baseURL, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the answer: %v (got %q)", err, b)
	}
	return string(b)
}

// TestHeadProbes: HEAD /healthz and /readyz answer the status of their GET
// (load balancers probe with HEAD) and no body.
func TestHeadProbes(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	for _, path := range []string{"/healthz", "/readyz"} {
		got := raw(t, gw.URL, "HEAD "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		head, body, _ := strings.Cut(got, "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 200 ") || body != "" {
			t.Fatalf("HEAD %s: got %q, want 200 and no body", path, got)
		}
	}
	rs.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := call(t, "HEAD", gw.URL+"/readyz", "")
		if r.status == http.StatusServiceUnavailable {
			if len(r.body) != 0 {
				t.Fatalf("HEAD /readyz: a body of %d bytes", len(r.body))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HEAD /readyz with Redis stopped: got %d after 30s, want 503", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := call(t, "HEAD", gw.URL+"/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("HEAD /healthz with Redis stopped: got %d, want 200", r.status)
	}
	r := call(t, "POST", gw.URL+"/healthz", "")
	if got := r.header.Get("Allow"); got != "GET, HEAD" {
		t.Fatalf("POST /healthz: Allow %q, want \"GET, HEAD\"", got)
	}
}

// TestMethodNotAllowedNamesMethods: a 405 always lists the methods that
// the path has, also for a path with an escaped slash, which the router
// matches on its raw form.
func TestMethodNotAllowedNamesMethods(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	for _, path := range []string{"/locks/a/b%2Fc", "/locks/a%2Fb/c", "/locks/a/b%2F..%2Flease/lease"} {
		r := call(t, "PATCH", gw.URL+path, "")
		if r.status == http.StatusNotFound {
			continue
		}
		wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := r.header.Get("Allow"); got == "" {
			t.Fatalf("PATCH %s: 405 with an empty Allow", path)
		}
	}
}

// TestAnswersBeforeRouting pins down what net/http answers itself, in
// text/plain, before lockgate sees the request: openapi.yaml documents it.
func TestAnswersBeforeRouting(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	for name, tc := range map[string]struct {
		request string
		status  int
	}{
		"headers over 64 KiB": {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n", 431},
		"malformed Host":      {"GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		"no Host":             {"GET /healthz HTTP/1.1\r\n\r\n", 400},
		"HTTP/3.0":            {"GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505},
	} {
		t.Run(name, func(t *testing.T) {
			got := raw(t, gw.URL, tc.request)
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
			if err != nil {
				t.Fatalf("parse %q: %v", got, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Fatalf("got %q, %q; want %d in text/plain", resp.Status, resp.Header.Get("Content-Type"), tc.status)
			}
		})
	}
}

// TestMaxConnections: with --max-connections N, connection N+1 is not
// served while N are open (it waits in the kernel's accept queue), and is
// served as soon as one of them closes.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--max-connections", "2", "--max-waiters", "1")
	addr := strings.TrimPrefix(gw.URL, "http://")
	get := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	open := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, get); err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	answered := func(c net.Conn, br *bufio.Reader, within time.Duration) bool {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(within))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	// Two kept-alive connections, each served once.
	c1, r1 := open()
	c2, r2 := open()
	if !answered(c1, r1, 20*time.Second) || !answered(c2, r2, 20*time.Second) {
		t.Fatal("the first two connections were not served")
	}
	// The third is accepted by the kernel, not by the gateway.
	c3, r3 := open()
	if answered(c3, r3, 500*time.Millisecond) {
		t.Fatal("a third connection was served while two were open, with --max-connections 2")
	}
	c1.Close()
	if !answered(c3, r3, 20*time.Second) {
		t.Fatal("the third connection was not served within 20s of the first closing")
	}
}

// TestMaxConnectionsRefused: a limit the waiters alone could fill is
// refused at start.
func TestMaxConnectionsRefused(t *testing.T) {
	t.Parallel()
	var out, logs strings.Builder
	err := app.Run(t.Context(), []string{"gateway", "--addr", "127.0.0.1:0", "--max-connections", "100"},
		func(k string) string { return map[string]string{"LOCKGATE_JWT_SECRET": secret}[k] }, &out, &logs)
	if err == nil || !strings.Contains(err.Error(), "--max-waiters") {
		t.Fatalf("got %v, want an error saying --max-connections must exceed --max-waiters", err)
	}
}
