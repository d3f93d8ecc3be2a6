package safety

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestHistoryTwoGateways: clients on two gateways sharing one Redis take
// turns on three locks, waiting for each other; the history shows no two
// grants of a lock overlapping, tokens increasing in real-time order, the
// resource never taking a stale token, and is linearizable.
func TestHistoryTwoGateways(t *testing.T) {
	rs := redistest.Start(t)
	gw1 := startGateway(t, "--redis-url", rs.URL())
	gw2 := startGateway(t, "--redis-url", rs.URL())
	res := newResource()
	h := workload{
		clients:  []*client{newClient(t, gw1), newClient(t, gw2)},
		workers:  12,
		locks:    []string{"hist/a", "hist/b", "hist/c"},
		ttl:      20 * time.Second, // no lease runs out during the run
		wait:     10 * time.Second,
		duration: 3 * time.Second,
		res:      res,
		enough:   func(h *history) bool { return h.created >= 30 },
	}.run(t)
	n := h.check(t, res)
	if n < 30 {
		t.Skipf("only %d grants, run on to %d times the run's length (a busy machine): too few to show anything; every check still ran and passed", n, workloadStretch)
	}
	t.Logf("%d calls, %d grants", len(h.ops), n)
	h.linearizable(t)
}
