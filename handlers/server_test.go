package handlers

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	dto "github.com/prometheus/client_model/go"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/locktest"
)

const testSecret = "handlers-test-secret-32-bytes-long!!"

// lateGranter is an engine that grants only once its caller has gone: the
// race the handler must clean up after.
type lateGranter struct {
	*embedded.Backend
	waiting chan struct{} // closed when Acquire is called
	granted chan struct{} // closed when it has granted
}

func (l *lateGranter) Acquire(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.Grant, error) {
	close(l.waiting)
	<-ctx.Done()
	req.Wait = 0
	defer close(l.granted)
	return l.Backend.Acquire(context.WithoutCancel(ctx), key, req)
}

func newTestServer(t *testing.T, b locks.Backend) (*Server, *httptest.Server) {
	t.Helper()
	s, h := newTestHandler(t, Config{Backend: b})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return s, ts
}

// newTestHandler is the gateway's handler for cfg, with tokens signed by
// testSecret unless cfg has an Authenticator.
func newTestHandler(tb testing.TB, cfg Config) (*Server, http.Handler) {
	tb.Helper()
	if cfg.Auth == nil {
		authn, err := auth.NewAuthenticator(auth.Config{Secret: []byte(testSecret)})
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Auth = authn
	}
	s, err := NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := s.Handler()
	if err != nil {
		tb.Fatal(err)
	}
	return s, h
}

func testToken(t *testing.T) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "t", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGrantAfterClientLeftIsReleased: when the engine grants after the
// caller hung up, the handler releases the grant instead of leaving the
// lock held for a lease nobody knows about.
func TestGrantAfterClientLeftIsReleased(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	b := &lateGranter{Backend: mem, waiting: make(chan struct{}), granted: make(chan struct{})}
	_, ts := newTestServer(t, b)

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/locks/a/b", strings.NewReader(`{"ttl_ms":60000,"wait_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-b.waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: got %v, want context.Canceled", err)
	}
	select {
	case <-b.granted:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not notice the client leave within 10s")
	}

	// The late grant is released, not left to its lease.
	locktest.WaitUntilFree(t, mem, locks.Key{Namespace: "a", Name: "b"})
}

// TestDrainTurnsWaitersAway: Drain answers a waiting acquire with 503.
func TestDrainTurnsWaitersAway(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	s, ts := newTestServer(t, mem)
	key := locks.Key{Namespace: "a", Name: "b"}
	if _, err := mem.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/locks/a/b", strings.NewReader(`{"wait_ms":60000}`))
		req.Header.Set("Authorization", "Bearer "+testToken(t))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	// Drain only once the acquire waits, seen through the waiters gauge.
	deadline := time.Now().Add(10 * time.Second)
	for gaugeValue(t, s) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the acquire never waited")
		}
		time.Sleep(2 * time.Millisecond) // poll interval
	}
	s.Drain()
	select {
	case code := <-got:
		if code != http.StatusServiceUnavailable {
			t.Fatalf("status: got %d, want 503", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not turned away within 10s of Drain")
	}
}

func gaugeValue(t *testing.T, s *Server) int {
	t.Helper()
	var m dto.Metric
	if err := s.metrics.waiters.Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetGauge().GetValue())
}

// TestGrantNotWrittenIsReleased: when the 201 carrying a grant cannot be
// written to the caller's connection, the handler releases the grant: the
// caller never learnt its token, so nobody else could.
func TestGrantNotWrittenIsReleased(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, h := newTestHandler(t, Config{Backend: mem})
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = &grantDroppingListener{Listener: ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)

	req, _ := http.NewRequest("POST", ts.URL+"/locks/a/b", strings.NewReader(`{"ttl_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got %s, want no answer (the connection drops the 201)", resp.Status)
	}
	// The grant whose 201 could not be written is released, not left to its lease.
	locktest.WaitUntilFree(t, mem, locks.Key{Namespace: "a", Name: "b"})
}

// grantDroppingListener accepts connections on which writing a 201 fails,
// as on a connection the caller has reset.
type grantDroppingListener struct{ net.Listener }

func (l *grantDroppingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &grantDroppingConn{Conn: c}, nil
}

type grantDroppingConn struct{ net.Conn }

func (c *grantDroppingConn) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("HTTP/1.1 201")) {
		c.Conn.Close()
		return 0, errors.New("connection reset by peer (test)")
	}
	return c.Conn.Write(b)
}
