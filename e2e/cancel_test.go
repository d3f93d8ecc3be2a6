package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestClientHangsUpWhileWaiting: a waiter whose client leaves is a
// cancellation, not a failure: status 499 in the access log at info level,
// outcome "cancelled" in the metrics, no 503 and no warning anywhere. Any
// token holder can do this at will; it must not page anyone.
func TestClientHangsUpWhileWaiting(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/hangup/x"
		acquire(t, url, `{"ttl_ms":60000}`)

		ctx, cancel := context.WithCancel(t.Context())
		left := make(chan error, 1)
		go func() {
			_, err := send(ctx, "POST", url, `{"wait_ms":60000}`, bearer(token(t, nil))...)
			left <- err
		}()
		waitForWaiters(t, gw, 1)
		cancel()
		<-left

		line := pollLog(t, gw, func(l string) bool {
			return strings.Contains(l, `"message":"request"`) && strings.Contains(l, `"path":"/locks/hangup/x"`) &&
				!strings.Contains(l, `"status":201`)
		})
		if !strings.Contains(line, `"status":499`) || !strings.Contains(line, `"level":"info"`) {
			t.Errorf("access log: got %s, want status 499 at level info", line)
		}
		for _, l := range strings.Split(gw.logs.String(), "\n") {
			if strings.Contains(l, `"request_id"`) && (strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`)) {
				t.Errorf("got a warning for a client that left: %s", l)
			}
		}
		m := string(call(t, "GET", gw.URL+"/metrics", "").body)
		for _, want := range []string{
			`lockgate_acquires_total{outcome="cancelled"} 1`,
			`lockgate_acquires_total{outcome="error"} 0`,
			`lockgate_http_requests_total{code="499",method="POST",route="/locks/{namespace}/{name}"} 1`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if strings.Contains(m, `code="503"`) {
			t.Errorf("/metrics counts a 503 for a client that left")
		}
	})
}

// pollLog returns the first log line of gw for which match is true,
// waiting up to 10 s for it.
func pollLog(t *testing.T, gw *gateway, match func(line string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range strings.Split(gw.logs.String(), "\n") {
			if match(l) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such log line within 10s; logs:\n%s", gw.logs)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}
