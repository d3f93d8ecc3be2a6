package safety

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestFencingAfterFailoverWithLostWrites: Redis loses the last writes,
// fencing counter included, and comes back with an older counter; the next
// fencing token must still be larger than every token handed out before.
//   - failover: a replica synced with the primary is promoted
//     (REPLICAOF NO ONE) while the primary goes on granting, as an
//     asynchronous replica promoted during a partition does;
//   - stale-snapshot: Redis is killed and restarts from an RDB snapshot
//     saved before the last grants.
func TestFencingAfterFailoverWithLostWrites(t *testing.T) {
	const lock = "fence/x"
	// grants takes and releases the lock n times on c, and returns the
	// largest fencing token handed out.
	grants := func(t *testing.T, c *client, n int) int64 {
		t.Helper()
		var highest int64
		for range n {
			g := c.mustAcquire(t, lock, time.Minute)
			wantStatus(t, "release", c.release(t.Context(), lock, g.Token), http.StatusNoContent)
			highest = max(highest, g.FencingToken)
		}
		return highest
	}
	// after checks the first grant on c against the largest token before.
	after := func(t *testing.T, c *client, highest int64, what string) {
		t.Helper()
		var g grant
		eventually(t, 10*time.Second, "a grant "+what, func() bool {
			gg, r := c.acquire(t.Context(), lock, time.Minute, 0)
			g = gg
			return r.status == http.StatusCreated
		})
		if g.FencingToken <= highest {
			t.Fatalf("first fencing token %s: got %d, want more than %d, which was handed out before", what, g.FencingToken, highest)
		}
		res := newResource()
		if !res.write(lock, highest) || !res.write(lock, g.FencingToken) {
			t.Fatal("the resource refused the new holder after the old token")
		}
	}

	t.Run("failover", func(t *testing.T) {
		primary := redistest.Start(t)
		replica := redistest.StartReplica(t, primary)
		gw := startGateway(t, "--redis-url", primary.URL())
		c := newClient(t, gw)
		grants(t, c, 3)
		replica.WaitSynced(t, primary)
		replica.Promote(t)
		highest := grants(t, c, 5) // lost to the promoted replica
		promoted := newClient(t, startGateway(t, "--redis-url", replica.URL()))
		after(t, promoted, highest, "after the failover")
	})
	t.Run("stale-snapshot", func(t *testing.T) {
		rs := redistest.StartPersistent(t)
		// The default --redis-timeout (2 s): the grants before the restart
		// must not time out on a busy machine (300 ms did, beside a
		// CPU-bound process), and the restart's broken connections fail
		// at once rather than time out, which after tries past.
		gw := startGateway(t, "--redis-url", rs.URL())
		c := newClient(t, gw)
		grants(t, c, 3)
		if err := rs.Client(t).Save(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		highest := grants(t, c, 5) // not in the snapshot
		rs.Restart(t)
		after(t, c, highest, "after the restart from the snapshot")
	})
}
