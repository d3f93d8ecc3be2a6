package clients

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestClientsMaxHold: each client passes max_hold_ms on an acquire, and
// reads hold_until from the grant and from a renewal, which asked for
// more than the cap leaves and got the lease up to it.
func TestClientsMaxHold(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	wantCapped(t, map[string]func(*testing.T) *exec.Cmd{
		"python": func(t *testing.T) *exec.Cmd {
			return pythonSnippet(t, `g = c.acquire("clients/capped", 1000, 0, "py", max_hold_ms=60000)
r = c.call("PUT", "clients/capped", "/lease", body={"ttl_ms": 3600000}, lock_token=g["token"])[1]
print("capped", str(g["hold_until"] is not None and r["hold_until"] == r["expires_at"] and r["ttl_ms"] <= 60000).lower())`)
		},
		"node": func(t *testing.T) *exec.Cmd {
			return nodeSnippet(t, `const path = lg.lockPath("clients/capped");
const { data: g } = await c.POST("/locks/{namespace}/{name}", { params: { path }, body: { ttl_ms: 1000, max_hold_ms: 60000 } });
const { data: r } = await c.PUT("/locks/{namespace}/{name}/lease", { params: { path, header: { "Lock-Token": g.token } }, body: { ttl_ms: 3600000 } });
console.log("capped", g.hold_until !== undefined && r.hold_until === r.expires_at && r.ttl_ms <= 60000);`)
		},
	})
}

// lockSetMaxHoldClients pass a lock set's max_hold_ms, through a plain
// acquire of a set and the helper that holds one, and print whether each
// lock of the set states its hold_until.
var lockSetMaxHoldClients = map[string]func(t *testing.T) *exec.Cmd{
	"python": func(t *testing.T) *exec.Cmd {
		return pythonSnippet(t, `s = c.acquire_set(["clients/set-a", "clients/set-b"], ttl_ms=1000, max_hold_ms=60000)
capped = len(s["locks"]) == 2 and all(l.get("hold_until") is not None for l in s["locks"])
c.release_set(s)
with c.holding_set(["clients/set-c"], ttl_ms=1000, max_hold_ms=60000) as k:
    capped = capped and k.lock_set["locks"][0].get("hold_until") is not None
print("capped", str(capped).lower())`)
	},
	"node": func(t *testing.T) *exec.Cmd {
		return nodeSnippet(t, `const s = await lg.acquireSet(c, ["clients/set-a", "clients/set-b"], { ttlMs: 1000, maxHoldMs: 60000 });
let capped = s !== undefined && s.locks.length === 2 && s.locks.every((l) => l.hold_until !== undefined);
if (s) await lg.releaseSet(c, s);
await lg.withLockSet(c, ["clients/set-c"], { ttlMs: 1000, maxHoldMs: 60000 }, async (k) => {
  capped = capped && k.locks[0].hold_until !== undefined;
});
console.log("capped", capped);`)
	},
}

// TestClientsLockSetMaxHold: each client passes a lock set's max_hold_ms
// (Python's acquire_set and holding_set, Node's acquireSet and
// withLockSet), and each lock of the set states its hold_until.
func TestClientsLockSetMaxHold(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	wantCapped(t, lockSetMaxHoldClients)
}

// wantCapped runs each client's snippet against a gateway of its own, and
// wants it to print "capped true", exit 0, and show no secret.
func wantCapped(t *testing.T, clients map[string]func(*testing.T) *exec.Cmd) {
	for name, run := range clients {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := run(t) // skips early without the runtime
			gw := startGateway(t)
			p := start(t, gw, cmd)
			if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stdout.String(), "capped true") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want capped true", code, p.stdout, p.stderr)
			}
			p.noSecrets(t)
		})
	}
}
