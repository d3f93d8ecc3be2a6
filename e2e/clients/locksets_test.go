package clients

import (
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lockSetClients run, in each client, the same steps: a set with a lock
// held by someone else is refused at once (lock_held), holding none of
// its locks; a set that waits gets every lock once it is free, is renewed
// while it works (until it was renewed twice: past its first lease), and
// is released whole.
var lockSetClients = map[string]func(t *testing.T) *exec.Cmd{
	"python": func(t *testing.T) *exec.Cmd {
		return pythonSnippet(t, `try:
    c.acquire_set(["clients/set-c", "clients/set-b"])
    print("granted, wrongly")
except Problem as p:
    print("refused", p.code, flush=True)
with c.holding_set(["clients/set-a", "clients/set-b"], ttl_ms=3000, wait_ms=30000) as held:
    print("acquired", " ".join(f"{l['lock']}={l['fencing_token']}" for l in held.lock_set["locks"]), flush=True)
    while held.renewals < 2 and not held.lost.wait(0.05):
        pass
    print("renewed", held.renewals, "times")
print("lost: " + held.why if held.lost.is_set() else "released")`)
	},
	"node": func(t *testing.T) *exec.Cmd {
		return nodeSnippet(t, `const refused = await lg.acquireSet(c, ["clients/set-c", "clients/set-b"]);
console.log(refused ? "granted, wrongly" : "refused lock_held");
await lg.withLockSet(c, ["clients/set-a", "clients/set-b"], { ttlMs: 3000, waitMs: 30000 }, async (set, lost, renewals) => {
  console.log("acquired", set.locks.map((l) => l.lock + "=" + l.fencing_token).join(" "));
  while (renewals() < 2 && !lost.aborted) await new Promise((resolve) => setTimeout(resolve, 50));
  console.log("renewed", renewals(), "times");
});
console.log("released");`)
	},
}

var setAcquiredRE = regexp.MustCompile(`acquired clients/set-a=(\d+) clients/set-b=(\d+)\n`)

// TestClientsLockSet: each client's lock-set helpers take every lock or
// none, wait for a held one, renew the set while it works, and release it.
func TestClientsLockSet(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	for name, run := range lockSetClients {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := run(t) // skips early without the runtime
			gw := startGateway(t)
			status, held := gw.acquire(t, "clients/set-b", time.Minute)
			if status != http.StatusCreated {
				t.Fatalf("acquire: %d", status)
			}
			p := start(t, gw, cmd)
			p.waitOutput(t, "refused lock_held")
			waitForWaiters(t, gw, 1)
			if status, _ := gw.call(t, "DELETE", "clients/set-b", "", held.Token); status != http.StatusNoContent {
				t.Fatalf("release: %d", status)
			}
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
			}
			out := p.stdout.String()
			m := setAcquiredRE.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("stdout %q, want the set's locks and fencing tokens, in the order asked", out)
			}
			if fence, _ := strconv.ParseInt(m[2], 10, 64); fence <= held.FencingToken {
				t.Fatalf("clients/set-b's fencing token %d after the holder's %d, want larger", fence, held.FencingToken)
			}
			// The work lasts until the second renewal, past the first
			// lease's end: the set must still be whole at its release.
			if r := regexp.MustCompile(`renewed (\d+) times`).FindStringSubmatch(out); r == nil || r[1] == "0" || r[1] == "1" {
				t.Errorf("stdout %q, want 2 renewals while working", out)
			}
			if !strings.HasSuffix(out, "released\n") {
				t.Errorf("stdout %q, want the set released whole", out)
			}
			// The refused set took nothing: clients/set-c, which it named
			// with a lease of the default 30 s, is free.
			for _, l := range []string{"clients/set-a", "clients/set-b", "clients/set-c"} {
				if gw.held(t, l) {
					t.Errorf("%s is held after the client exited", l)
				}
			}
			p.noSecrets(t)
		})
	}
}
