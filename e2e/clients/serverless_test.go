package clients

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serverlessProgram is the Node example's serverless handler, run by its
// simulated platform.
func serverlessProgram(t *testing.T) *exec.Cmd {
	t.Helper()
	nodeProgram(t) // installs and builds, or skips
	cmd := exec.Command("node", filepath.Join("dist", "serverless.js"))
	cmd.Dir = nodeDir
	return cmd
}

// TestNodeServerlessTicket: the lock is busy for longer than one
// invocation (2.5 s invocations, each long-polling 1 s, the lock released after about 4 s): the
// handler takes a ticket, polls it across invocations, gets the lock with
// it, works and releases.
func TestNodeServerlessTicket(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	cmd := serverlessProgram(t) // built before the minute's lease starts
	gw := startGateway(t)
	status, held := gw.acquire(t, "node/serverless", time.Minute)
	if status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	p := start(t, gw, cmd, "LOCK=node/serverless", "INVOCATION_MS=2500", "WORK_MS=100")
	p.waitOutput(t, "ticket for node/serverless: rank=0")
	p.waitOutput(t, "still waiting for node/serverless")
	if status, _ := gw.call(t, "DELETE", "node/serverless", "", held.Token); status != http.StatusNoContent {
		t.Fatalf("release: %d", status)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("serverless example: exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	out := p.stdout.String()
	for _, want := range []string{"acquired node/serverless with the ticket", "released node/serverless"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if gw.held(t, "node/serverless") {
		t.Fatal("the lock is held after the example")
	}
	p.noSecrets(t)
}

// TestNodeServerlessRetriesLostAcquire: the answer to the first acquire
// never arrives; the platform retries the invocation with the same input,
// whose Idempotency-Key gets the grant the first call made: one grant.
func TestNodeServerlessRetriesLostAcquire(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	gw := startGateway(t)
	proxy := dropFirstAnswer(t, gw.URL)
	p := start(t, &gateway{URL: proxy, Redis: gw.Redis}, serverlessProgram(t), "LOCK=node/serverless-retry", "WORK_MS=100")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("serverless example: exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "retrying with the same input") || !strings.Contains(p.stdout.String(), "acquired node/serverless-retry at once") {
		t.Fatalf("want a failed invocation, then the lock at once\nstdout: %s\nstderr: %s", p.stdout, p.stderr)
	}
	gw.wantMetrics(t, `lockgate_acquires_total{outcome="granted"} 1`, `lockgate_acquires_total{outcome="replayed"} 1`)
	if gw.held(t, "node/serverless-retry") {
		t.Fatal("the lock is held after the example")
	}
	p.noSecrets(t)
}
