package e2e

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/callbacks"
)

// silentReceiver accepts connections and never answers: the receiver of
// a tenant that ties up whoever calls it.
type silentReceiver struct {
	addr  string
	conns atomic.Int64
}

func startSilentReceiver(t *testing.T) *silentReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &silentReceiver{addr: l.Addr().String()}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			r.conns.Add(1)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return r
}

// TestCallbacksFairBetweenTenants: alice's receiver accepts and never
// answers, and alice holds 200 tickets handed their grants, each with a
// notification for it; bob's callback, to a healthy receiver, still
// arrives within 2 s of his grant, and /metrics shows alice's waiting.
func TestCallbacksFairBetweenTenants(t *testing.T) {
	t.Parallel()
	silent := startSilentReceiver(t)
	bobHook := startHook(t, func(int) int { return http.StatusNoContent })
	env := map[string]string{
		"LOCKGATE_JWT_SECRET":      secret,
		"LOCKGATE_CALLBACK_SECRET": callbacks.NewSecret().Encode(),
		"LOCKGATE_CALLBACK_ALLOW":  fmt.Sprintf("http://%s/* %s/*", silent.addr, bobHook.URL),
	}
	gw := startGatewayEnv(t, env, "--ticket-liveness", "2m", "--log-level", "warn")
	holder := bearer(token(t, jwt.MapClaims{"sub": "holder"}))
	alice := bearer(token(t, jwt.MapClaims{"sub": "alice"}))
	bob := bearer(token(t, jwt.MapClaims{"sub": "bob"}))
	body := func(cb string) string {
		return fmt.Sprintf(`{"ttl_ms":60000,"wait_ms":600000,"callback_url":%q}`, cb)
	}
	const aliceTickets = 200
	for i := range aliceTickets {
		path := fmt.Sprintf("/locks/fair/alice-%d", i)
		var held grant
		wantJSON(t, call(t, "POST", gw.URL+path, `{"ttl_ms":60000}`, holder...), http.StatusCreated, &held)
		openTicket(t, gw.URL+path, body("http://"+silent.addr+"/hook"), alice)
		if r := call(t, "DELETE", gw.URL+path, "", with(holder, []string{"Lock-Token", held.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release %s: got %d %s", path, r.status, r.body)
		}
	}
	// Alice's notifications are being attempted, and hang.
	for deadline := time.Now().Add(30 * time.Second); silent.conns.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("alice's receiver got %d connections within 30s, want 2", silent.conns.Load())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}

	path := "/locks/fair/bob"
	var held grant
	wantJSON(t, call(t, "POST", gw.URL+path, `{"ttl_ms":60000}`, holder...), http.StatusCreated, &held)
	openTicket(t, gw.URL+path, body(bobHook.URL+"/hook"), bob)
	released := time.Now()
	if r := call(t, "DELETE", gw.URL+path, "", with(holder, []string{"Lock-Token", held.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: got %d %s", r.status, r.body)
	}
	select {
	case c := <-bobHook.got:
		if took := c.at.Sub(released); took > 2*time.Second {
			t.Fatalf("bob's callback came %v after his grant, want within 2s", took)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("bob's callback did not come within 2s of his grant (alice's receiver has %d connections)", silent.conns.Load())
	}
	for _, series := range []string{"lockgate_callback_queue_depth", "lockgate_callback_queue_oldest_seconds"} {
		if v := metricValue(t, gw.URL, series); v <= 0 {
			t.Errorf("%s: got %v, want alice's notifications waiting", series, v)
		}
	}
}
