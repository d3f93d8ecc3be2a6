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
	}.run(t)
	n := h.check(t, res)
	if n < 30 {
		t.Fatalf("only %d grants in the run: too few to show anything", n)
	}
	t.Logf("%d calls, %d grants", len(h.ops), n)
	h.linearizable(t)
}
