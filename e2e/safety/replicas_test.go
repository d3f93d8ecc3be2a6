package safety

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestSentinelMinReplicasLosesNoAcknowledgedGrant: a gateway with
// --redis-min-replicas 1 on a primary, a replica and three sentinels.
// Clients take fresh locks (long leases) while the replica is linked, then
// for lag after its link is cut (as with a replica that fell behind), and
// the primary is killed (SIGKILL); the sentinels promote the replica. Every
// grant the gateway answered 201 must be held on the new primary, with its
// fencing token: the grants the replica missed were refused (503), not
// acknowledged. The new primary has no replica left, so it only answers
// reads. Without the flag, the grants of the last stretch are lost
// (TestSentinelFailover lists them).
func TestSentinelMinReplicasLosesNoAcknowledgedGrant(t *testing.T) {
	const (
		clients = 4
		lag     = time.Second
		ttl     = 5 * time.Minute
	)
	ss := redistest.StartSentinels(t)
	gw := startGateway(t, "--redis-url", ss.URL(), "--redis-min-replicas", "1", "--redis-replica-timeout", "200ms")
	c := newClient(t, gw)

	type acked struct {
		lock  string
		fence int64
	}
	var (
		mu       sync.Mutex
		granted  []acked
		refused  int // 503 backend_unavailable
		cutAt    time.Time
		afterCut int // grants answered 201 after the cut was made
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				lock := fmt.Sprintf("acked/c%d-%d", i, n)
				g, r := c.acquire(t.Context(), lock, ttl, 0)
				mu.Lock()
				switch {
				case r.status == http.StatusCreated && r.err == nil:
					granted = append(granted, acked{lock, g.FencingToken})
					if !cutAt.IsZero() && time.Now().After(cutAt) {
						afterCut++
					}
				case r.status == http.StatusServiceUnavailable:
					refused++
				}
				mu.Unlock()
			}
		})
	}
	eventually(t, 10*time.Second, "grants while the replica is linked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(granted) >= 20
	})
	mu.Lock()
	cutAt = time.Now()
	mu.Unlock()
	cutReplication(t, ss.Primary, ss.Replica)
	time.Sleep(lag) // clients keep asking while the replica misses everything
	from := ss.Primary.Addr
	ss.KillPrimary(t)
	close(stop)
	wg.Wait()
	ss.WaitFailover(t, from, 30*time.Second)
	// The new primary has no replica: it grants nothing now, but answers.
	eventually(t, 30*time.Second, "an answer from the new primary", func() bool {
		r := c.do(t.Context(), "GET", "/locks/"+granted[0].lock, "")
		return r.status == http.StatusOK || r.status == http.StatusNotFound
	})

	lost := 0
	for _, g := range granted {
		if got := c.holder(t, g.lock); got != g.fence {
			lost++
			t.Errorf("%s: acknowledged with fencing token %d, held by %d after the failover (0: free)", g.lock, g.fence, got)
		}
	}
	t.Logf("%d grants acknowledged, %d after the cut; %d refused (503); %d lost", len(granted), afterCut, refused, lost)
	if refused == 0 {
		t.Fatalf("no acquire was refused while the replica was cut off for %v: the test did not exercise the WAIT", lag)
	}
}
