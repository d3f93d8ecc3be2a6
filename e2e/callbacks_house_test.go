package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/callbacks"
	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// loopbackPort is a loopback port free a moment ago, for a listener that
// must be named before it starts.
func loopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestCallbacksNeverReachTheHouse: a callback_url at the gateway's own
// port, its pprof listener or its Redis is refused when the ticket is
// opened, with the README's narrow allow-list and with one that names
// each of them outright, and no attempt is made. A pattern that would
// allow every loopback port is refused at start.
func TestCallbacksNeverReachTheHouse(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gwPort, pprofPort := loopbackPort(t), loopbackPort(t)
	_, redisPort, _ := net.SplitHostPort(rs.Addr)
	readme := "https://*.functions.example.com/lockgate/* http://127.0.0.1:9000/*"
	hostile := readme
	for _, port := range []string{gwPort, pprofPort, redisPort} {
		hostile += " http://127.0.0.1:" + port + "/*"
	}
	for name, allow := range map[string]string{"README": readme, "NamedOutright": hostile} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{
				"LOCKGATE_JWT_SECRET":      secret,
				"LOCKGATE_CALLBACK_SECRET": callbacks.NewSecret().Encode(),
				"LOCKGATE_CALLBACK_ALLOW":  allow,
				"LOCKGATE_PPROF_ADDR":      "127.0.0.1:" + pprofPort,
			}
			if allow == hostile {
				gwPort = loopbackPort(t) // a gateway of its own
			}
			gw := startGatewayEnv(t, env, "--redis-url", rs.URL(), "--addr", "127.0.0.1:"+gwPort, "--log-level", "warn")
			auth := bearer(token(t, nil))
			path := gw.URL + "/locks/house/x"
			holder := acquire(t, path, `{"ttl_ms":60000}`)
			ports := map[string]string{"gateway": gwPort, "pprof": pprofPort, "redis": redisPort}
			for what, port := range ports {
				body := fmt.Sprintf(`{"wait_ms":60000,"callback_url":"http://127.0.0.1:%s/debug/pprof/profile"}`, port)
				p := wantProblem(t, call(t, "POST", path, body, with(auth, respondAsync)...), http.StatusBadRequest, "invalid_request")
				if !strings.Contains(p.Detail, "callback_url") {
					t.Errorf("%s: detail %q, want it to name callback_url", what, p.Detail)
				}
			}
			if r := call(t, "DELETE", path, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
				t.Fatalf("release: got %d", r.status)
			}
			for _, o := range []string{"ok", "status", "error", "refused"} {
				if v := metricValue(t, gw.URL, `lockgate_callback_attempts_total{outcome="`+o+`"}`); v != 0 {
					t.Errorf("attempts %s: got %v, want 0", o, v)
				}
			}
		})
	}
	t.Run("AnyLoopbackPortRefusedAtStart", func(t *testing.T) {
		env := map[string]string{
			"LOCKGATE_JWT_SECRET":      secret,
			"LOCKGATE_CALLBACK_SECRET": callbacks.NewSecret().Encode(),
			"LOCKGATE_CALLBACK_ALLOW":  "http://127.0.0.1:*/*",
		}
		var logs gatewaytest.Buffer
		gw, err := app.Start(t.Context(), []string{"gateway", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &logs)
		if err == nil {
			gw.Stop()
		}
		if err == nil || !strings.Contains(err.Error(), "must name its port") {
			t.Fatalf("got %v, want a refusal saying the pattern must name its port", err)
		}
	})
}
