package clients

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPythonExampleRetriesLostAcquire: the gateway's answer to the first
// acquire never reaches the Python example (the connection drops once the
// lock is granted). The example retries with the same Idempotency-Key,
// gets that very grant, works under it and releases it: one grant, one
// replay, and no lock left behind.
func TestPythonExampleRetriesLostAcquire(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	cmd := pythonProgram(t)
	proxy := dropFirstAnswer(t, gw.URL)
	p := start(t, &gateway{URL: proxy, Redis: gw.Redis}, cmd, "LOCK=python/retry", "TTL_MS=3000", "WORK_MS=200")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("python example: exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "retrying with the same Idempotency-Key") {
		t.Fatalf("stderr %q, want a retry", p.stderr)
	}
	if !strings.Contains(p.stdout.String(), "released python/retry") || gw.held(t, "python/retry") {
		t.Fatalf("the lock is held after the example, or it did not release it\nstdout: %s", p.stdout)
	}
	gw.wantMetrics(t, `lockgate_acquires_total{outcome="granted"} 1`, `lockgate_acquires_total{outcome="replayed"} 1`)
	p.noSecrets(t)
}

// dropFirstAnswer forwards connections to target, except that it closes
// the first one as soon as the answer starts to arrive, without passing
// a byte of it on. It returns the proxy's URL.
func dropFirstAnswer(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			first := n.Add(1) == 1
			go func() {
				defer client.Close()
				server, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer server.Close()
				go io.Copy(server, client)
				if first {
					server.SetReadDeadline(time.Now().Add(30 * time.Second))
					server.Read(make([]byte, 1)) // the answer begins: drop it
					return
				}
				io.Copy(client, server)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
