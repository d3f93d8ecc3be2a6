package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestTwoGatewaysOneRedis: a waiter on gateway 1 is woken by a release on
// gateway 2, and both see the same holder.
func TestTwoGatewaysOneRedis(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	twoGateways(t, []string{"--redis-url", url}, []string{"--redis-url", url})
}

// TestTwoGatewaysOneRedisCluster: the same on a three-master Redis
// Cluster, each gateway given a different seed node.
func TestTwoGatewaysOneRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	twoGateways(t,
		[]string{"--redis-cluster", "--redis-url", "redis://" + c.Nodes[0].Addr},
		[]string{"--redis-cluster", "--redis-url", "redis://" + c.Nodes[1].Addr})
}

func twoGateways(t *testing.T, args1, args2 []string) {
	gw1 := startGateway(t, args1...)
	gw2 := startGateway(t, args2...)
	held := acquire(t, gw2.URL+"/locks/shared/x", `{"ttl_ms":60000}`)
	wantProblem(t, call(t, "POST", gw1.URL+"/locks/shared/x", "", bearer(token(t, nil))...), http.StatusConflict, "lock_held")

	got := callAsync(t, "POST", gw1.URL+"/locks/shared/x", `{"wait_ms":30000}`, bearer(token(t, nil))...)
	waitForWaiters(t, gw1, 1)
	if r := call(t, "DELETE", gw2.URL+"/locks/shared/x", "", with(bearer(token(t, nil)), []string{"Lock-Token", held.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release on gateway 2: got %d %s", r.status, r.body)
	}
	select {
	case r := <-got:
		var g grant
		wantJSON(t, r, http.StatusCreated, &g)
		if g.FencingToken <= held.FencingToken {
			t.Fatalf("fencing token: got %d after %d, want larger", g.FencingToken, held.FencingToken)
		}
		var info struct {
			FencingToken int64 `json:"fencing_token"`
		}
		wantJSON(t, call(t, "GET", gw2.URL+"/locks/shared/x", "", bearer(token(t, nil))...), http.StatusOK, &info)
		if info.FencingToken != g.FencingToken {
			t.Fatalf("gateway 2 sees fencing token %d, want %d", info.FencingToken, g.FencingToken)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter on gateway 1 was not woken within 10s of the release on gateway 2")
	}
}

// TestRedisDown: with Redis unresponsive, calls fail with 503 and
// Retry-After within a bound tied to --redis-timeout, and /readyz says so.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL(), "--redis-timeout", "200ms")
	acquire(t, gw.URL+"/locks/down/warmup", "")
	rs.Pause(t)
	t.Cleanup(func() { rs.Resume(t) })

	start := time.Now()
	r := call(t, "POST", gw.URL+"/locks/down/x", "", bearer(token(t, nil))...)
	wantProblem(t, r, http.StatusServiceUnavailable, "backend_unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the 503 took %v with a 200ms Redis timeout", d)
	}
	wantProblem(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusServiceUnavailable, "backend_unavailable")

	rs.Resume(t)
	deadline := time.Now().Add(10 * time.Second)
	for call(t, "GET", gw.URL+"/readyz", "").status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz not 200 within 10s of Redis resuming")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// TestFenceRetentionFlag: LOCKGATE_FENCE_RETENTION sets how long a lock's
// fencing counter outlives its last grant in Redis.
func TestFenceRetentionFlag(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gw := startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_SECRET": secret, "LOCKGATE_FENCE_RETENTION": "90s"},
		"--redis-url", rs.URL())
	acquire(t, gw.URL+"/locks/retention/x", "")
	pttl, err := rs.Client(t).PTTL(t.Context(), "lockgate:{retention/x}:fence").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 80*time.Second || pttl > 90*time.Second {
		t.Fatalf("fencing counter PTTL: got %v, want about 90s", pttl)
	}
}

// TestRedisRefusedOrSilent: a 503 says whether nothing was done (the
// connection was refused) or the outcome is unknown (Redis did not answer
// in time), with Retry-After either way.
func TestRedisRefusedOrSilent(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		// timeout is --redis-timeout. go-redis dials up to 5 times, 100 ms
		// apart, before it reports a refused connection: a shorter timeout
		// ends the call first, and the caller hears "did not answer".
		timeout string
		fault   func(t *testing.T, rs *redistest.Server)
		want    string
	}{
		"refused": {"2s", func(t *testing.T, rs *redistest.Server) { rs.Stop() },
			"could not reach the lock backend (connection refused or unreachable); nothing was done"},
		"silent": {"300ms", func(t *testing.T, rs *redistest.Server) { rs.Pause(t); t.Cleanup(func() { rs.Resume(t) }) },
			"the lock backend did not answer in time; the outcome of the call is unknown"},
	} {
		t.Run(name, func(t *testing.T) {
			rs := redistest.Start(t)
			gw := startGateway(t, "--redis-url", rs.URL(), "--redis-timeout", tc.timeout)
			acquire(t, gw.URL+"/locks/down/warmup", "")
			tc.fault(t, rs)
			for _, url := range []string{gw.URL + "/locks/down/x", gw.URL + "/readyz"} {
				method := "POST"
				if strings.HasSuffix(url, "/readyz") {
					method = "GET"
				}
				r := call(t, method, url, "", bearer(token(t, nil))...)
				p := wantProblem(t, r, http.StatusServiceUnavailable, "backend_unavailable")
				if p.Detail != tc.want {
					t.Errorf("%s %s: detail: got %q, want %q", method, url, p.Detail, tc.want)
				}
				if r.header.Get("Retry-After") == "" {
					t.Errorf("%s %s: 503 without Retry-After", method, url)
				}
			}
		})
	}
}
