package clients

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pythonProgram returns a command that runs examples/python with python3,
// or skips the test when python3 is not installed.
func pythonProgram(t *testing.T) *exec.Cmd {
	t.Helper()
	lookPaths(t, "python3")
	// -B: no __pycache__ in the repository.
	return exec.Command("python3", "-B", filepath.Join(examples, "python", "lockgate_example.py"))
}

// TestPythonExample: the standard-library client waits for a held lock,
// renews it from a thread while working, writes with the fencing token to
// a resource that refuses a stale one, and releases.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	status, held := gw.acquire(t, "python/example", 500*time.Millisecond)
	if status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	// Renewals every second (a third of the TTL), each with 2 s to spare
	// on a busy machine.
	p := start(t, gw, pythonProgram(t), "LOCK=python/example", "TTL_MS=3000", "WAIT_MS=20000", "WORK_MS=4000")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("python example: exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	out := p.stdout.String()
	m := acquiredRE.FindStringSubmatch(out)
	if m == nil || m[1] != "python/example" {
		t.Fatalf("stdout %q, want an acquired line for python/example", out)
	}
	fence, _ := strconv.ParseInt(m[2], 10, 64)
	if fence <= held.FencingToken {
		t.Fatalf("fencing token %d after the holder's %d, want larger", fence, held.FencingToken)
	}
	for _, want := range []string{
		"write with fencing_token=" + m[2] + ": accepted",
		"stale write with fencing_token=" + strconv.FormatInt(fence-1, 10) + ": rejected",
		"released python/example",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// 4 s of work on a 3 s lease cannot end well without renewals.
	if r := regexp.MustCompile(`renewed (\d+) times`).FindStringSubmatch(out); r == nil || r[1] == "0" {
		t.Errorf("stdout %q, want renewals while working", out)
	}
	if gw.held(t, "python/example") {
		t.Fatal("the lock is still held after the example exited")
	}
	p.noSecrets(t)
}

// TestPythonExampleHeld: a lock that stays held ends the example with 1
// and the gateway's reason.
func TestPythonExampleHeld(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	if status, _ := gw.acquire(t, "python/busy", time.Minute); status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	p := start(t, gw, pythonProgram(t), "LOCK=python/busy", "WAIT_MS=100")
	if code := p.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("python example on a held lock: exit %d, want 1\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "lock_held") {
		t.Fatalf("stderr %q, want lock_held", p.stderr)
	}
	p.noSecrets(t)
}

// TestPythonExampleLeaseLost: when Redis forgets the lock mid-work, the
// next renewal fails and the example stops with 3, well before its work
// would have ended.
func TestPythonExampleLeaseLost(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	p := start(t, gw, pythonProgram(t), "LOCK=python/lost", "TTL_MS=900", "WORK_MS=60000")
	p.waitOutput(t, "acquired python/lost")
	if err := gw.Redis.Client(t).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 3 {
		t.Fatalf("python example after losing the lease: exit %d, want 3\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "lease on python/lost lost") {
		t.Fatalf("stderr %q, want it to say the lease was lost", p.stderr)
	}
}
