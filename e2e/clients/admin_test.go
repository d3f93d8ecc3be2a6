package clients

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// adminJWT signs a token that administers every namespace, as sub "ops".
func adminJWT(t *testing.T) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "ops", "ns": []string{"*"}, "ns_admin": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

// pythonSnippet returns a command that runs code with examples/python's
// client importable, or skips the test when python3 is not installed.
func pythonSnippet(t *testing.T, code string) *exec.Cmd {
	t.Helper()
	lookPaths(t, "python3")
	dir, err := filepath.Abs(filepath.Join(examples, "python"))
	if err != nil {
		t.Fatal(err)
	}
	// start sets the command's environment: the path goes in the code.
	return exec.Command("python3", "-B", "-c", "import os, sys\nsys.path.insert(0, "+strconv.Quote(dir)+")\n"+
		"from lockgate_example import *\n"+
		"c = Client(os.environ['LOCKGATE_URL'], os.environ['LOCKGATE_TOKEN'])\n"+code)
}

// nodeSnippet returns a command that runs code, an ES module, with the
// built examples/node client importable as ./dist/lockgate.js and c its
// client; it skips the test as nodeProgram does.
func nodeSnippet(t *testing.T, code string) *exec.Cmd {
	t.Helper()
	nodeProgram(t) // builds dist, or skips
	cmd := exec.Command("node", "--input-type=module", "-e",
		"import * as lg from './dist/lockgate.js';\n"+
			"const c = lg.newClient(process.env.LOCKGATE_URL, process.env.LOCKGATE_TOKEN);\n"+code)
	cmd.Dir = nodeDir
	return cmd
}

// acquirePermit takes a permit of sem (of limit permits) over HTTP,
// waiting up to wait, and returns the status.
func (g *gateway) acquirePermit(ctx context.Context, t *testing.T, sem string, limit int, wait time.Duration) int {
	body := `{"ttl_ms":60000,"limit":` + jsonInt(int64(limit)) + `,"wait_ms":` + jsonInt(wait.Milliseconds()) + `}`
	req, err := http.NewRequestWithContext(ctx, "POST", g.URL+"/semaphores/"+sem, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+jwtFor(t))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil { // not the end of the test
			t.Error(err)
		}
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClientsResizeSemaphore: each client's resize raises the limit of a
// semaphore in use, which hands the waiter its permit at once, then lowers
// it; a JWT that does not administer the namespace gets forbidden.
func TestClientsResizeSemaphore(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	for name, run := range map[string]func(*testing.T, string) *exec.Cmd{
		"python": func(t *testing.T, limit string) *exec.Cmd {
			return pythonSnippet(t, `s = c.resize_semaphore("clients/pool", `+limit+`)
print("limit", s["limit"], "held", s["held"], "waiters", s["waiters"])`)
		},
		"node": func(t *testing.T, limit string) *exec.Cmd {
			return nodeSnippet(t, `const s = await lg.resizeSemaphore(c, "clients/pool", `+limit+`);
console.log("limit", s.limit, "held", s.held, "waiters", s.waiters);`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, "1") // skips early without the runtime
			gw := startGateway(t)
			if st := gw.acquirePermit(t.Context(), t, "clients/pool", 1, 0); st != http.StatusCreated {
				t.Fatalf("acquire: %d", st)
			}
			waiter := make(chan int, 1)
			go func() { waiter <- gw.acquirePermit(t.Context(), t, "clients/pool", 1, 30*time.Second) }()
			deadline := time.Now().Add(30 * time.Second)
			for _, w := gw.semaphoreHolders(t, "clients/pool"); w != 1; _, w = gw.semaphoreHolders(t, "clients/pool") {
				if time.Now().After(deadline) {
					t.Fatal("no waiter within 30s")
				}
				time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
			}

			denied := start(t, gw, run(t, "2"))
			if code := denied.wait(t, 60*time.Second); code == 0 || !strings.Contains(denied.stderr.String(), "forbidden") {
				t.Fatalf("resize by a non-administrator: exit %d, stderr %q; want a failure that says forbidden", code, denied.stderr)
			}
			raised := start(t, gw, run(t, "2"), "LOCKGATE_TOKEN="+adminJWT(t))
			if code := raised.wait(t, 60*time.Second); code != 0 || !strings.Contains(raised.stdout.String(), "limit 2 held 2 waiters 0") {
				t.Fatalf("raise: exit %d, stdout %q, stderr %q; want limit 2 with 2 held", code, raised.stdout, raised.stderr)
			}
			select {
			case st := <-waiter:
				if st != http.StatusCreated {
					t.Fatalf("the waiter's acquire: %d, want 201", st)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiter got no permit within 30s of the raise")
			}
			lowered := start(t, gw, run(t, "1"), "LOCKGATE_TOKEN="+adminJWT(t))
			if code := lowered.wait(t, 60*time.Second); code != 0 || !strings.Contains(lowered.stdout.String(), "limit 1 held 2 waiters 0") {
				t.Fatalf("lower: exit %d, stdout %q, stderr %q; want limit 1 with 2 still held", code, lowered.stdout, lowered.stderr)
			}
			denied.noSecrets(t)
		})
	}
}

// TestClientsBreakWithPeriod: each client's break with a period leaves the
// holder its lock, renewable up to the period's end only; then the grant
// ends, broken.
//
// The period must outlast starting the client's runtime and the renew
// after it: with 700 ms, a Node start on a loaded machine took longer, and
// the renew rightly found the grant broken.
func TestClientsBreakWithPeriod(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	for name, run := range map[string]func(*testing.T) *exec.Cmd{
		"python": func(t *testing.T) *exec.Cmd {
			return pythonSnippet(t, `print("broken", c.break_lock("clients/slow", 4000))`)
		},
		"node": func(t *testing.T) *exec.Cmd {
			return nodeSnippet(t, `console.log("broken", await lg.breakLock(c, "clients/slow", 4000));`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t) // skips early without the runtime
			gw := startGateway(t)
			status, g := gw.acquire(t, "clients/slow", time.Minute)
			if status != http.StatusCreated {
				t.Fatalf("acquire: %d", status)
			}
			p := start(t, gw, run(t), "LOCKGATE_TOKEN="+adminJWT(t))
			if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stdout.String(), "broken 1") {
				t.Fatalf("break: exit %d, stdout %q, stderr %q; want 1 grant broken", code, p.stdout, p.stderr)
			}
			status, body := gw.call(t, "PUT", "clients/slow/lease", `{"ttl_ms":60000}`, g.Token)
			var l struct {
				TTLMs int64 `json:"ttl_ms"`
			}
			if status != http.StatusOK || json.Unmarshal(body, &l) != nil || l.TTLMs <= 0 || l.TTLMs > 4000 {
				t.Fatalf("renew during the period: %d %s, want 200 with ttl_ms at most 4000", status, body)
			}
			deadline := time.Now().Add(15 * time.Second)
			for gw.held(t, "clients/slow") {
				if time.Now().After(deadline) {
					t.Fatal("still held 15 s after a break period of 4 s")
				}
				time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
			}
			if status, body := gw.call(t, "PUT", "clients/slow/lease", "", g.Token); status != http.StatusConflict || !strings.Contains(string(body), `"reason":"broken"`) {
				t.Fatalf("renew after the period: %d %s, want 409 with reason broken", status, body)
			}
		})
	}
}
