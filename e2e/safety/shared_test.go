package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

func (c *client) acquireShared(ctx context.Context, lock string, ttl, wait time.Duration) (grant, result) {
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d,"mode":"shared"}`, ttl.Milliseconds(), wait.Milliseconds())
	r := c.do(ctx, "POST", "/locks/"+lock, body)
	var g grant
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

// TestCheckerSharedOverlap holds the checker to the rule of shared locks:
// two shared grants may overlap; a shared and an exclusive one, or two
// exclusive ones, may not.
func TestCheckerSharedOverlap(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	rec := func(fence int64, shared bool, from, to int) *grantRec {
		return &grantRec{lock: "l", fence: fence, shared: shared, known: at(to),
			acquired: op{call: at(from - 1), ret: at(from)}}
	}
	for _, tc := range []struct {
		name     string
		a, b     *grantRec
		overlaps bool
	}{
		{"two shared", rec(1, true, 0, 100), rec(2, true, 50, 150), false},
		{"shared and exclusive", rec(1, true, 0, 100), rec(2, false, 50, 150), true},
		{"exclusive and shared", rec(1, false, 0, 100), rec(2, true, 50, 150), true},
		{"two exclusive", rec(1, false, 0, 100), rec(2, false, 50, 150), true},
		{"shared then exclusive, apart", rec(1, true, 0, 100), rec(2, false, 100, 150), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{grants: []*grantRec{tc.a, tc.b}}
			found := false
			for _, f := range h.findings(nil, 1) {
				found = found || f.kind == overlap
			}
			if found != tc.overlaps {
				t.Fatalf("overlap found: %v, want %v", found, tc.overlaps)
			}
		})
	}
}

// TestSharedHistoryTwoGateways: clients on two gateways sharing one Redis
// take shared and exclusive holds of two locks, about half each, waiting
// for each other. No exclusive grant overlaps any other grant of its lock,
// tokens increase in real-time order, the resource (written by exclusive
// holders only) never takes a stale token, and shared grants did overlap:
// the run tested what it meant to.
func TestSharedHistoryTwoGateways(t *testing.T) {
	rs := redistest.Start(t)
	gw1 := startGateway(t, "--redis-url", rs.URL())
	gw2 := startGateway(t, "--redis-url", rs.URL())
	res := newResource()
	h := workload{
		clients:  []*client{newClient(t, gw1), newClient(t, gw2)},
		workers:  12,
		locks:    []string{"rw/a", "rw/b"},
		ttl:      20 * time.Second, // no lease runs out during the run
		wait:     10 * time.Second,
		duration: 3 * time.Second,
		res:      res,
		hold:     100 * time.Millisecond,
		mixed:    true,
		// About half of them shared: enough of each kind, and shared
		// grants together (checked below), in all but a starved run.
		enough: func(h *history) bool { return h.created >= 40 },
	}.run(t)
	n := h.check(t, res)
	var shared, exclusive, together int
	for i, a := range h.grants {
		if a.shared {
			shared++
		} else {
			exclusive++
		}
		for _, b := range h.grants[i+1:] {
			if a.shared && b.shared && a.lock == b.lock && a.acquired.ret.Before(b.end()) && b.acquired.ret.Before(a.end()) {
				together++
			}
		}
	}
	if shared < 10 || exclusive < 10 || together == 0 {
		t.Skipf("%d shared and %d exclusive grants, %d pairs of shared ones together, run on to %d times the run's length (a busy machine): too few to show anything; every check still ran and passed", shared, exclusive, together, workloadStretch)
	}
	t.Logf("%d calls, %d grants: %d shared, %d exclusive; %d pairs of shared grants held together", len(h.ops), n, shared, exclusive, together)
}
