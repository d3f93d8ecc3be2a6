package safety

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// The replica barrier: with --redis-min-replicas 1, no path answers a
// grant that no replica acknowledged. Ticket grants are the paths these
// tests take: a ticket opened on a free lock, and a poll that picks up a
// grant handed to the ticket.

// minReplicaArgs are the flags of a gateway that waits for one replica.
func minReplicaArgs(url string) []string {
	return []string{"--redis-url", url, "--redis-min-replicas", "1", "--redis-replica-timeout", "200ms"}
}

// startBarrier starts a primary, a replica that acknowledges its writes
// (WaitSynced) and a gateway that waits for it, and returns the replica and
// a client of the gateway.
func startBarrier(t *testing.T) (replica *redistest.Server, c *client) {
	t.Helper()
	rs := redistest.Start(t)
	replica = redistest.StartReplica(t, rs)
	replica.WaitSynced(t, rs)
	return replica, newClient(t, startGateway(t, minReplicaArgs(rs.URL())...))
}

// TestReplicaBarrierTicketOpen: the replica stopped (SIGSTOP), a plain
// acquire is refused (503), and so must be a ticket on a free lock: 503,
// or a 202 that holds no grant yet, never a 201.
func TestReplicaBarrierTicketOpen(t *testing.T) {
	replica, c := startBarrier(t)

	replica.Pause(t)
	defer replica.Resume(t)
	if _, r := c.acquire(t.Context(), "barrier/plain", time.Minute, 0); r.status != http.StatusServiceUnavailable {
		t.Fatalf("plain acquire with the replica stopped: got %s, want 503", r)
	}
	g, _, r := c.openTicket(t.Context(), "barrier/open", time.Minute, 10*time.Second)
	if r.status == http.StatusCreated {
		t.Fatalf("ticket on a free lock with the replica stopped: got 201 (fencing token %d), want 503 or 202: a grant no replica acknowledged", g.FencingToken)
	}
}

// TestReplicaBarrierTicketPoll: a ticket waits behind a holder; the
// replica is stopped and the holder releases, handing the lock to the
// ticket. The poll that picks the grant up must answer 503 and keep the
// ticket; once the replica runs again, a poll answers the grant.
func TestReplicaBarrierTicketPoll(t *testing.T) {
	replica, c := startBarrier(t)
	const lock = "barrier/poll"
	holder := c.mustAcquire(t, lock, time.Minute)
	_, tk, r := c.openTicket(t.Context(), lock, time.Minute, 30*time.Second)
	if r.status != http.StatusAccepted {
		t.Fatalf("ticket behind a holder: got %s, want 202", r)
	}

	replica.Pause(t)
	paused := true
	defer func() {
		if paused {
			replica.Resume(t)
		}
	}()
	if r := c.release(t.Context(), lock, holder.Token); r.status != http.StatusNoContent {
		t.Fatalf("holder's release: got %s, want 204", r)
	}
	g, r := c.poll(t.Context(), tk)
	if r.status == http.StatusCreated {
		t.Fatalf("poll picking up the handed grant with the replica stopped: got 201 (fencing token %d), want 503: a grant no replica acknowledged", g.FencingToken)
	}
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("poll picking up the handed grant with the replica stopped: got %s, want 503", r)
	}
	replica.Resume(t)
	paused = false
	eventually(t, lostReplyWithin, "a poll answers the grant once the replica runs", func() bool {
		g, r = c.poll(t.Context(), tk)
		return r.status == http.StatusCreated
	})
	if g.FencingToken <= holder.FencingToken {
		t.Fatalf("the ticket's grant: fencing token %d, want more than the holder's %d", g.FencingToken, holder.FencingToken)
	}
}

// TestReplicaBarrierTicketFailover: the replica's link is cut (it misses
// every write from now on), a ticket is opened on a free lock, and the
// replica is promoted (REPLICAOF NO ONE) in the primary's place. If the
// ticket was answered 201, its grant must be on the new primary: a second
// caller (through a gateway that waits for no replica, since the new
// primary has none) must not get the lock.
func TestReplicaBarrierTicketFailover(t *testing.T) {
	rs := redistest.Start(t)
	replica := redistest.StartReplica(t, rs)
	replica.WaitSynced(t, rs)
	p := startProxy(t, rs.Addr) // the service address the gateway dials
	gw := startGateway(t, minReplicaArgs("redis://"+p.Addr)...)
	c := newClient(t, gw)
	const lock = "barrier/failover"

	cutReplication(t, rs, replica)
	g, _, r := c.openTicket(t.Context(), lock, time.Minute, 10*time.Second)
	replica.Promote(t)
	p.setUpstream(replica.Addr)
	if r.status != http.StatusCreated {
		t.Logf("ticket with the replica cut off: %s (no grant answered)", r)
		return
	}
	second := newClient(t, startGateway(t, "--redis-url", "redis://"+p.Addr))
	if g2, r := second.acquire(t.Context(), lock, time.Minute, 0); r.status == http.StatusCreated {
		t.Fatalf("after the failover a second caller got the lock the ticket was granted (fencing token %d, answered 201 with the replica cut off): got 201 (fencing token %d), want 409: two holders",
			g.FencingToken, g2.FencingToken)
	}
}
