package clients

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// lockSetPriorityClients run, in each client, a lock set at priority 10,
// refused with invalid_priority before anything is taken, then one at 9
// that waits for the held lock and gets both.
var lockSetPriorityClients = map[string]func(t *testing.T) *exec.Cmd{
	"python": func(t *testing.T) *exec.Cmd {
		return pythonSnippet(t, `try:
    c.acquire_set(["clients/prio-a", "clients/prio-b"], wait_ms=1000, priority=10)
    print("granted, wrongly")
except Problem as p:
    print("refused", p.code, flush=True)
with c.holding_set(["clients/prio-a", "clients/prio-b"], ttl_ms=60000, wait_ms=30000, priority=9) as held:
    print("acquired", len(held.lock_set["locks"]), flush=True)`)
	},
	"node": func(t *testing.T) *exec.Cmd {
		return nodeSnippet(t, `try {
  await lg.acquireSet(c, ["clients/prio-a", "clients/prio-b"], { waitMs: 1000, priority: 10 });
  console.log("granted, wrongly");
} catch (e) {
  console.log(String(e).includes("invalid_priority") ? "refused invalid_priority" : "refused otherwise: " + e);
}
await lg.withLockSet(c, ["clients/prio-a", "clients/prio-b"], { ttlMs: 60000, waitMs: 30000, priority: 9 }, async (set) => {
  console.log("acquired", set.locks.length);
});`)
	},
}

// TestClientsLockSetPriority: each client passes a lock set's priority
// (Python's acquire_set and holding_set, Node's acquireSet and
// withLockSet): the set waits at it in the held lock's queue, and one out
// of 0 to 9 is refused with invalid_priority before anything is taken.
func TestClientsLockSetPriority(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	for name, run := range lockSetPriorityClients {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testLockSetPriority(t, run(t)) // skips early without the runtime
		})
	}
}

func testLockSetPriority(t *testing.T, cmd *exec.Cmd) {
	gw := startGateway(t)
	status, held := gw.acquire(t, "clients/prio-b", time.Minute)
	if status != http.StatusCreated {
		t.Fatalf("acquire: %d", status)
	}
	p := start(t, gw, cmd)
	p.waitOutput(t, "refused invalid_priority")
	var info struct {
		QueuePriorities []int `json:"queue_priorities"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(info.QueuePriorities) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the set never queued on clients/prio-b")
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
		if _, body := gw.call(t, "GET", "clients/prio-b", "", ""); json.Unmarshal(body, &info) != nil {
			t.Fatalf("GET clients/prio-b: %s", body)
		}
	}
	if !slices.Equal(info.QueuePriorities, []int{9}) {
		t.Fatalf("got queue_priorities %v, want [9]: the set's priority", info.QueuePriorities)
	}
	if status, _ := gw.call(t, "DELETE", "clients/prio-b", "", held.Token); status != http.StatusNoContent {
		t.Fatalf("release: %d", status)
	}
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stdout.String(), "acquired 2") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want acquired 2", code, p.stdout, p.stderr)
	}
	p.noSecrets(t)
}
