package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestMinReplicas: a gateway with --redis-min-replicas 1 on a primary
// with one replica grants while the replica keeps up; while the replica is
// stopped (SIGSTOP), an acquire is a 503 within about
// --redis-replica-timeout that says the replicas did not acknowledge, and
// leaves nothing held on the primary; a renew is a 503 that says the lease
// may or may not be extended; once the replica resumes, grants come again.
func TestMinReplicas(t *testing.T) {
	t.Parallel()
	// Long enough for a healthy replica on a loaded 2-core machine (at
	// 200 ms, the first acquire failed under -race -count=4: 0 of 1
	// acknowledged), short enough for the test.
	const replicaTimeout = time.Second
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	// A WAIT holds its connection for the replica timeout, and calls queue
	// behind it (the clean-up's release waits too): the Redis timeout
	// leaves room for a few.
	gw := startGateway(t, "--redis-url", primary.URL(), "--redis-min-replicas", "1",
		"--redis-replica-timeout", replicaTimeout.String(), "--redis-timeout", (5 * replicaTimeout).String())
	auth := bearer(token(t, nil))
	url := gw.URL + "/locks/replicas/a"

	held := acquire(t, gw.URL+"/locks/replicas/held", `{"ttl_ms":60000}`)

	replica.Pause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			replica.Resume(t)
		}
	})
	start := time.Now()
	p := wantProblem(t, call(t, "POST", url, `{"ttl_ms":60000}`, auth...), http.StatusServiceUnavailable, "backend_unavailable")
	took := time.Since(start)
	if took < replicaTimeout || took > replicaTimeout+5*time.Second {
		t.Fatalf("503 after %s, want about --redis-replica-timeout %s", took, replicaTimeout)
	}
	t.Logf("503 after %s with --redis-replica-timeout %s", took, replicaTimeout)
	if !strings.Contains(p.Detail, "replicas did not acknowledge the grant") || !strings.Contains(p.Detail, "released") {
		t.Fatalf("detail: got %q, want it to say the replicas did not acknowledge, and the grant was released", p.Detail)
	}
	waitFree(t, url, auth) // released on the primary

	r := call(t, "PUT", gw.URL+"/locks/replicas/held/lease", `{"ttl_ms":60000}`, with(auth, []string{"Lock-Token", held.Token})...)
	p = wantProblem(t, r, http.StatusServiceUnavailable, "backend_unavailable")
	if !strings.Contains(p.Detail, "may or may not be") {
		t.Fatalf("renew detail: got %q, want it to say the lease may or may not be extended", p.Detail)
	}

	replica.Resume(t)
	resumed = true
	replica.WaitSynced(t, primary)
	g := acquire(t, url, `{"ttl_ms":60000}`)
	if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release after the replica resumed: got %d %s, want 204", r.status, r.body)
	}
}
