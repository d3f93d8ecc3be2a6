package clients

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeDir is the Node example's directory.
var nodeDir = filepath.Join(examples, "node")

var nodeBuild struct {
	once sync.Once
	skip string
	err  error
}

// startNodeBuild starts what nodeProgram does first, if node and npm are
// installed and no test did yet, and returns at once: a test calls it
// before t.Parallel, so that the build runs while tests before it do.
func startNodeBuild() {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return
		}
	}
	go nodeBuild.once.Do(buildNode)
}

func buildNode() { nodeBuild.skip, nodeBuild.err = nodeSetup(nodeDir, nil) }

// nodeProgram installs the example's locked dependencies when they are
// missing (npm ci), compiles it once with tsc, and returns a command that
// runs it. It skips the test when node or npm is not installed, or when
// the dependencies are missing and the npm registry cannot be reached.
func nodeProgram(t *testing.T) *exec.Cmd {
	t.Helper()
	lookPaths(t, "node", "npm")
	nodeBuild.once.Do(buildNode)
	if nodeBuild.skip != "" {
		t.Skip(nodeBuild.skip)
	}
	if nodeBuild.err != nil {
		t.Fatal(nodeBuild.err)
	}
	return exec.Command("node", filepath.Join("dist", "main.js"))
}

// nodeSetup runs npm ci in dir, when node_modules is missing, and then the
// build, with env added to npm's environment. It returns a reason to skip,
// and no error, when npm ci is needed and the registry does not answer a
// ping: a machine without network access cannot run these tests, and that
// is not a failure of the example. Any other failure is an error.
func nodeSetup(dir string, env []string) (skip string, err error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		if err := npm(dir, env, "ping", "--fetch-retries=0", "--fetch-timeout=20000"); err != nil {
			return "examples/node's dependencies are not installed and the npm registry cannot be reached, " +
				"so the Node example is not tested; run 'npm ci' in examples/node with network access once (" + firstLines(err.Error(), 2) + ")", nil
		}
		if err := npm(dir, env, "ci", "--no-audit", "--no-fund"); err != nil {
			return "", err
		}
	}
	return "", npm(dir, env, "run", "--silent", "build")
}

func npm(dir string, env []string, args ...string) error {
	cmd := exec.Command("npm", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return &npmError{args: args, err: err, out: out}
	}
	return nil
}

// firstLines is s up to its nth line, the lines joined with "; ".
func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "; ")
}

type npmError struct {
	args []string
	err  error
	out  []byte
}

func (e *npmError) Error() string {
	return "npm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + string(e.out)
}

// TestNodeSetupSkipsWithoutRegistry: with the dependencies missing and a
// registry that does not answer, the Node tests are skipped with a reason,
// not failed.
func TestNodeSetupSkipsWithoutRegistry(t *testing.T) {
	t.Parallel()
	lookPaths(t, "npm")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(nodeDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	skip, err := nodeSetup(dir, []string{"npm_config_registry=" + closed, "npm_config_cache=" + t.TempDir()})
	if err != nil || !strings.Contains(skip, "npm registry cannot be reached") {
		t.Fatalf("got skip %q, error %v; want a reason to skip and no error", skip, err)
	}
	t.Logf("skip reason: %s", skip)
}

var acquiredRE = regexp.MustCompile(`acquired (\S+) fencing_token=(\d+)`)

// TestNodeExample: the generated TypeScript client waits for a held lock,
// renews it while working, writes with the fencing token to a resource that
// refuses a stale one, and releases.
func TestNodeExample(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	cmd := nodeProgram(t) // built before the lock is taken
	cmd.Dir = nodeDir
	gw := startGateway(t)
	// Someone else holds the lock for a moment; the example waits it out.
	status, held := gw.acquire(t, "node/example", 500*time.Millisecond)
	if status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	// Renewals every second (a third of the TTL), each with 2 s to spare
	// on a busy machine.
	p := start(t, gw, cmd, "LOCK=node/example", "TTL_MS=3000", "WAIT_MS=20000", "WORK_MS=4000")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("node example: exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	out := p.stdout.String()
	m := acquiredRE.FindStringSubmatch(out)
	if m == nil || m[1] != "node/example" {
		t.Fatalf("stdout %q, want an acquired line for node/example", out)
	}
	fence, _ := strconv.ParseInt(m[2], 10, 64)
	if fence <= held.FencingToken {
		t.Fatalf("fencing token %d after the holder's %d, want larger", fence, held.FencingToken)
	}
	for _, want := range []string{
		"write with fencing_token=" + m[2] + ": accepted",
		"stale write with fencing_token=" + strconv.FormatInt(fence-1, 10) + ": rejected",
		"value set with fencing_token=" + m[2],
		"released node/example",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// inspectLock reads the value with the lock's index (#39).
	if r := regexp.MustCompile(`others read value "report written" at index ([1-9]\d*)\n`).FindStringSubmatch(out); r == nil {
		t.Errorf("stdout %q, want the value others read, and the lock's index", out)
	}
	// 4 s of work on a 3 s lease cannot end well without renewals.
	if r := regexp.MustCompile(`renewed (\d+) times`).FindStringSubmatch(out); r == nil || r[1] == "0" {
		t.Errorf("stdout %q, want renewals while working", out)
	}
	if gw.held(t, "node/example") {
		t.Fatal("the lock is still held after the example exited")
	}
	p.noSecrets(t)
}

// TestNodeExampleHeld: a lock that stays held ends the example with 1 and
// the gateway's reason.
func TestNodeExampleHeld(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	cmd := nodeProgram(t) // built before the minute's lease starts
	cmd.Dir = nodeDir
	gw := startGateway(t)
	if status, _ := gw.acquire(t, "node/busy", time.Minute); status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	p := start(t, gw, cmd, "LOCK=node/busy", "WAIT_MS=100")
	if code := p.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("node example on a held lock: exit %d, want 1\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "lock_held") {
		t.Fatalf("stderr %q, want lock_held", p.stderr)
	}
	p.noSecrets(t)
}

// TestNodeExampleLeaseLost: when Redis forgets the lock mid-work, the next
// renewal answers 409 and the example stops with 3.
func TestNodeExampleLeaseLost(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	gw := startGateway(t)
	cmd := nodeProgram(t)
	cmd.Dir = nodeDir
	p := start(t, gw, cmd, "LOCK=node/lost", "TTL_MS=900", "WORK_MS=60000")
	p.waitOutput(t, "acquired node/lost")
	if err := gw.Redis.Client(t).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 3 {
		t.Fatalf("node example after losing the lease: exit %d, want 3\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "lease on node/lost lost") {
		t.Fatalf("stderr %q, want it to say the lease was lost", p.stderr)
	}
}
