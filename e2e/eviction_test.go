package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

const evictionAdvice = ": it may evict live locks; set maxmemory-policy noeviction"

// TestRefusesEvictingRedis: on a Redis that may evict keys, live locks
// included, the gateway does not start, and says which setting to change.
func TestRefusesEvictingRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru")
	var out, logs gatewaytest.Buffer
	args := []string{"gateway", "--addr", "127.0.0.1:0", "--redis-url", rs.URL()}
	// Bounded: a gateway that serves anyway returns when ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := app.Run(ctx, args, func(k string) string { return map[string]string{"LOCKGATE_JWT_SECRET": secret}[k] }, &out, &logs)
	if err == nil || !strings.Contains(err.Error(), "Redis maxmemory-policy is allkeys-lru"+evictionAdvice) {
		t.Fatalf("got %v, want an error naming maxmemory-policy allkeys-lru", err)
	}
	if strings.Contains(out.String(), app.ListeningPrefix) {
		t.Fatal("it listened anyway")
	}
}

// TestReadyzRefusesEvictingRedis: a policy changed at runtime to one that
// evicts makes /readyz 503, with a detail that names the setting.
func TestReadyzRefusesEvictingRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	var h struct{ Status string }
	wantJSON(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusOK, &h)

	admin := rs.Client(t)
	if err := admin.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	r := call(t, "GET", gw.URL+"/readyz", "")
	p := wantProblem(t, r, http.StatusServiceUnavailable, "backend_unavailable")
	if want := "Redis maxmemory-policy is volatile-lru" + evictionAdvice; p.Detail != want {
		t.Fatalf("detail: got %q, want %q", p.Detail, want)
	}
	if strings.Contains(string(r.body), rs.Addr) {
		t.Fatalf("/readyz shows the Redis address: %s", r.body)
	}

	if err := admin.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusOK, &h)
}

// TestServesWhenConfigIsRefused: a Redis that will not say its policy (as
// managed services that rename CONFIG) is served, with one warning at
// start that says what to check.
func TestServesWhenConfigIsRefused(t *testing.T) {
	t.Parallel()
	rs := redistest.StartWith(t, "--rename-command", "CONFIG", "")
	gw := startGateway(t, "--redis-url", rs.URL())
	var h struct{ Status string }
	wantJSON(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusOK, &h)
	acquire(t, gw.URL+"/locks/config/x", "")
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	var warnings int
	for _, l := range strings.Split(gw.logs.String(), "\n") {
		if strings.Contains(l, "maxmemory-policy") {
			warnings++
			if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "make sure maxmemory-policy is noeviction") {
				t.Errorf("got %s, want a warning saying what to check", l)
			}
		}
	}
	if warnings != 1 {
		t.Fatalf("got %d log lines about maxmemory-policy, want 1; logs:\n%s", warnings, gw.logs)
	}
}
