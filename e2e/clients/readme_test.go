package clients

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// TestREADME runs every sh block of README.md, in order, in one bash, as a
// reader pastes them into one shell: with the gateways and the Redis each
// section starts, and with the outputs the README shows. What a reader
// does outside that shell, the test does:
//
//   - a gateway started in the foreground runs in "a terminal of its own":
//     the test starts that line in the background and waits until it
//     listens; the next gateway on its address stops it, as Ctrl-C would;
//     the export lines a --dev gateway prints are pasted into the shell;
//   - the block that waits "from a second shell" runs in the background
//     until the gateway counts its waiter;
//   - make build and go run ./cmd/... use binaries the test built (the same
//     go build), and make test is this very suite, so it is not run again;
//   - the README's ports (gateways' 8080 to 8084, a callback receiver's
//     8090, Redis's 6379, 7001 to 7003 and 26379) are mapped to free
//     loopback ports.
//
// A sample output in a block (a comment "# {...}" that is JSON) must match
// an object the block printed: the same fields, and the same values but
// for those that differ on every run (tokens, times, fencing tokens).
func TestREADME(t *testing.T) {
	lookPaths(t, "bash", "curl", "jq", "openssl", "python3", "redis-server")
	startBuild()
	t.Parallel()
	blocks := readmeShBlocks(t)
	seen := runREADME(t, blocks)
	for id := range readmeSpecs {
		if !seen[id] {
			t.Errorf("readmeSpecs has %s, which the README no longer has", id)
		}
	}
}

// devSections are the README's sections that say they work on the --dev
// gateway of "Set up", administrators' steps included.
var devSections = []string{"Set up", "A walk through with curl", "Semaphores"}

// TestREADMEOnDev runs the sections that say "--dev works" on the --dev
// gateway that "Set up" starts, as a reader who skips "Tokens for your
// gateway" would: with the tokens it printed, the break and the resize
// answer 200 (the samples of their blocks say so).
func TestREADMEOnDev(t *testing.T) {
	lookPaths(t, "bash", "curl", "jq")
	startBuild()
	t.Parallel()
	var blocks []readmeBlock
	for _, b := range readmeShBlocks(t) {
		if slices.Contains(devSections, b.section) {
			blocks = append(blocks, b)
		}
	}
	seen := runREADME(t, blocks)
	for _, want := range []string{"A walk through with curl#3", "Semaphores#0"} {
		if !seen[want] {
			t.Errorf("the README has no block %s, which breaks a lock or resizes a semaphore on --dev", want)
		}
	}
}

// runREADME runs blocks, in order, in one shell, and returns the ids of
// the blocks it ran.
func runREADME(t *testing.T, blocks []readmeBlock) map[string]bool {
	t.Helper()
	r := newREADMERun(t)
	seen := map[string]bool{}
	for _, b := range blocks {
		id := b.id()
		seen[id] = true
		spec := readmeSpecs[id]
		out := r.runBlock(t, b, spec)
		for _, w := range spec.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the output lacks %q:\n%s", id, w, out)
			}
		}
		if spec.check != nil {
			spec.check(t, out)
		}
		for _, sample := range b.samples(t) {
			if !matchesSample(sample, jsonObjects(out)) {
				t.Errorf("%s: no output matches the README's sample %s:\n%s", id, sample.text, out)
			}
		}
		if t.Failed() {
			t.Fatalf("stopped at %s; the shell's stderr so far:\n%s", id, r.stderr)
		}
	}
	if s := r.stderr.String(); s != "" {
		t.Errorf("the shell wrote to stderr:\n%s", s)
	}
	return seen
}

// readmeSpec is what the test knows of one block beyond its text.
type readmeSpec struct {
	want []string // in its output
	// secondShell: the block runs in the background, as in another
	// shell, until the gateway on 8080 counts one waiter; its output
	// belongs to the block after it.
	secondShell bool
	check       func(t *testing.T, out string)
}

// readmeSpecs are keyed by section and the block's place in it.
var readmeSpecs = map[string]readmeSpec{
	"Set up#0":                                {},
	"Tokens for your gateway#0":               {},
	"A walk through with curl#0":              {want: []string{`"code": "lock_held"`, `"held": true`, `"ttl_ms": 60000`}},
	"A walk through with curl#1":              {secondShell: true},
	"A walk through with curl#2":              {want: []string{"204\n", `"lock": "demo/report"`, `"token": "`}},
	"Clients#0":                               {want: []string{"nightly job, fencing token 1", "billing/nightly is free\n", "no lock of namespace billing is held\n", "\neyJ"}},
	"Once per period: cron on three hosts#0":  {want: []string{"report ran\nexit 0\nexit 80\n"}},
	"Running with Redis#0":                    {},
	"Running with Redis#1":                    {},
	"Running with Redis#2":                    {want: []string{"204\n"}},
	"Redis Cluster#0":                         {},
	"Redis Cluster#1":                         {want: []string{`{"lock":"demo/clustered","holds":1}`}},
	"Redis Sentinel#0":                        {},
	"Redis Sentinel#1":                        {want: []string{`{"lock":"demo/sentineled","holds":1}`}},
	"Waiting longer than one call: tickets#0": {want: []string{"deploying with fencing token 1", "204\n{\"lock\":\"demo/deploy\""}},
	"Callbacks instead of polling#0":          {want: []string{`{"status":400,"code":"invalid_request"}`}},
	"Callbacks instead of polling#1":          {},
	"Callbacks instead of polling#2": {want: []string{"204\n"}, check: func(t *testing.T, out string) {
		// The ticket's id, then the release's 204, then the id the
		// receiver printed from the notification it verified (the
		// gateway started in the background may print before them).
		lines := strings.Split(out, "\n")
		i := slices.Index(lines, "204")
		if i < 1 || i+1 >= len(lines) || lines[i-1] == "" || lines[i+1] != lines[i-1] {
			t.Errorf("Callbacks instead of polling: got %q, want the ticket's id, 204, and the receiver printing the same id", out)
		}
	}},
	"Semaphores#0": {want: []string{`"code": "semaphore_full"`, `"code": "limit_mismatch"`, `"limit": 2`,
		`"holders": [`, `"semaphore": "demo/encoder"`, "204\n"}},
	"Protect the resource, not just the lock#0": {want: []string{"stored written by the new holder\n",
		"refused: fencing token ", "is not larger than"}},
	"Shared (read) locks#0": {want: []string{`"code":"lock_held"`, "204\n204\n"}},
	"Retry-safe acquires#0": {want: []string{"204\n"}, check: func(t *testing.T, out string) {
		lines := strings.Split(out, "\n")
		if len(lines) < 2 || lines[0] != lines[1] || !strings.HasPrefix(lines[0], `{"token":"`) {
			t.Errorf("Retry-safe acquires: the retry answered %q, the first call %q: want the same grant", lines[1], lines[0])
		}
	}},
	"Re-entrant holds#0": {want: []string{"204\n"}},
	"Sessions: one lease for many locks#0": {want: []string{`{"lock":"demo/shard-3","fencing_token":`,
		`{"renewed":3,"gone":[]}`, `{"released":3}`, `{"event":"released","session":"`}},
	"Lock sets: every lock or none#1": {want: []string{"holding demo/acct-1,demo/ledger: demo/acct-1=", " demo/ledger=", "released\n"}},
	"One leader among N replicas#0": {want: []string{`"lock":"demo/leader"`, "204\n"}, check: func(t *testing.T, out string) {
		if n := strings.Count(out, "204\n"); n != 2 {
			t.Errorf("One leader among N replicas: %d releases answered 204, want 2:\n%s", n, out)
		}
	}},
	"Watching a lock#0": {want: []string{"Lockgate-Index: ", "204\n", "HTTP/1.1 404 Not Found\nLockgate-Index: "}, check: func(t *testing.T, out string) {
		// The history's first event is numbered from the clock: the
		// long-poll answers the acquire's index, the 404 after the release
		// and the stream the release's, one more.
		var index int64
		if i := strings.Index(out, "Lockgate-Index: "); i >= 0 {
			fmt.Sscan(out[i+len("Lockgate-Index: "):], &index)
		}
		want := fmt.Sprintf("{\"event\":\"acquired\",\"index\":%d}\n{\"event\":\"released\",\"index\":%d}\n", index, index+1)
		released := fmt.Sprintf("HTTP/1.1 404 Not Found\nLockgate-Index: %d\n", index+1)
		if index < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() || !strings.Contains(out, want) || !strings.Contains(out, released) {
			t.Errorf("Watching a lock: got %q, want an index from the clock, %q and the events %q", out, released, want)
		}
	}},
	// The long-poll's answer is the README's sample; the release ran.
	"Watching a lock#1": {want: []string{"204\n"}},
}

// readmeBlock is one sh block of README.md.
type readmeBlock struct {
	section string // the nearest heading above it
	index   int    // its place among its section's sh blocks
	text    string
}

func (b readmeBlock) id() string { return b.section + "#" + strconv.Itoa(b.index) }

// readmeShBlocks returns README.md's sh blocks in order.
func readmeShBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	section, in, fence := "", false, ""
	var text strings.Builder
	for line := range strings.Lines(string(readme)) {
		switch {
		case in && strings.TrimSpace(line) == "```":
			if fence == "sh" {
				n := 0
				for _, b := range blocks {
					if b.section == section {
						n++
					}
				}
				blocks = append(blocks, readmeBlock{section: section, index: n, text: text.String()})
			}
			in = false
		case in:
			text.WriteString(line)
		case strings.HasPrefix(line, "```"):
			in, fence = true, strings.TrimSpace(strings.TrimPrefix(line, "```"))
			text.Reset()
		case strings.HasPrefix(line, "## "), strings.HasPrefix(line, "### "):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no sh block")
	}
	return blocks
}

// readmeSample is a sample output the README shows in a block.
type readmeSample struct {
	text  string
	value map[string]any
}

// samples returns the block's sample outputs: comment lines "# {", and
// the comment lines that continue them, that hold a JSON object.
func (b readmeBlock) samples(t *testing.T) []readmeSample {
	t.Helper()
	var out []readmeSample
	var cur strings.Builder
	for line := range strings.Lines(b.text) {
		body, isComment := strings.CutPrefix(strings.TrimSpace(line), "#")
		body = strings.TrimSpace(body)
		switch {
		case isComment && cur.Len() == 0 && strings.HasPrefix(body, "{"):
			cur.WriteString(body)
		case isComment && cur.Len() > 0:
			cur.WriteString(body)
		default:
			continue
		}
		var v map[string]any
		if json.Unmarshal([]byte(cur.String()), &v) == nil {
			out = append(out, readmeSample{text: cur.String(), value: v})
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		t.Errorf("%s: the sample %q is not a JSON object", b.id(), cur.String())
	}
	return out
}

// varies are the fields whose values differ on every run.
var varies = map[string]bool{"index": true, "token": true, "ticket": true, "ticket_token": true, "fencing_token": true, "expires_at": true,
	"acquired_at": true, "retry_after_ms": true, "hold": true, "hold_ids": true, "signed_grant": true}

func matchesSample(s readmeSample, objects []map[string]any) bool {
	for _, o := range objects {
		if !slices.Equal(sortedKeys(o), sortedKeys(s.value)) {
			continue
		}
		same := true
		for k, v := range s.value {
			if !varies[k] && !reflect.DeepEqual(v, o[k]) && !(k == "ttl_ms" && countedDown(v, o[k])) {
				same = false
			}
		}
		if same {
			return true
		}
	}
	return false
}

// countedDown reports whether got is the lease of the sample want, less
// at most a second: a grant handed over and picked up later (a ticket's)
// reports what remains of its lease, and a busy machine takes
// milliseconds between the two.
func countedDown(want, got any) bool {
	w, ok1 := want.(float64)
	g, ok2 := got.(float64)
	return ok1 && ok2 && g <= w && g > w-1000
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonObjects returns the JSON objects of out that start a line, pretty
// printed or not.
func jsonObjects(out string) []map[string]any {
	var objs []map[string]any
	for i := 0; i < len(out); i++ {
		if out[i] != '{' || (i > 0 && out[i-1] != '\n') {
			continue
		}
		var v map[string]any
		if json.NewDecoder(strings.NewReader(out[i:])).Decode(&v) == nil {
			objs = append(objs, v)
		}
	}
	return objs
}

// readmeRun is the one shell the blocks run in, and what it started.
type readmeRun struct {
	dir     string
	shell   *exec.Cmd
	stdin   io.Writer
	stdout  *gatewaytest.Buffer
	stderr  *gatewaytest.Buffer
	ports   *strings.Replacer
	port    map[string]string // README port -> the test's
	chunks  int
	fg      string // the address of the gateway running "in a terminal of its own", if any
	readOff int    // how much of stdout the chunks have read
}

// newREADMERun starts the shell, with the package's build of the binaries.
func newREADMERun(t *testing.T) *readmeRun {
	t.Helper()
	dir := t.TempDir()
	bin, shims := programs(t), filepath.Join(dir, "shims")
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	realMake, _ := exec.LookPath("make")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	// go run ./cmd/X runs the built X, in place of go run (exec: the pid
	// of a background "go run" is the program's); make build has nothing
	// left to do; make test is the suite this test is part of.
	writeScript(t, filepath.Join(shims, "go"), `case "$1 $2" in
"run ./cmd/gateway"|"run ./cmd/lockctl") b=${2#./cmd/}; shift 2; exec `+shq(bin)+`/"$b" "$@" ;;
esac
exec `+shq(realGo)+` "$@"`)
	writeScript(t, filepath.Join(shims, "make"), `case "$*" in
build) echo "make build: bin/ was built by the test" ;;
test) echo "make test: this test is part of it" ;;
*) exec `+shq(realMake)+` "$@" ;;
esac`)
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	// The reader's shell is in the clone: the examples are at hand.
	exDir, err := filepath.Abs(examples)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exDir, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	r := &readmeRun{dir: dir, stdout: &gatewaytest.Buffer{}, stderr: &gatewaytest.Buffer{}, port: map[string]string{}}
	var pairs []string
	for _, p := range []string{"8080", "8081", "8082", "8083", "8084", "8090", "6379", "26379"} {
		r.port[p] = freePort(t)
		pairs = append(pairs, p, r.port[p])
	}
	for _, p := range []string{"7001", "7002", "7003"} {
		r.port[p] = clusterPort(t)
		pairs = append(pairs, p, r.port[p])
	}
	r.ports = strings.NewReplacer(pairs...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKGATE_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	r.shell = exec.Command("bash")
	r.shell.Dir, r.shell.Env = dir, env
	r.shell.Stdout, r.shell.Stderr = r.stdout, r.stderr
	r.shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.shell.WaitDelay = 2 * time.Second
	stdin, err := r.shell.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = stdin
	if err := r.shell.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The shell, and all it left in the background (gateways, Redis):
		// one process group, no job control.
		syscall.Kill(-r.shell.Process.Pid, syscall.SIGKILL)
		r.shell.Wait()
	})
	return r
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The README's ports are mapped to ports below the kernel's ephemeral
// range (32768 and up on Linux): a port that listening on :0 found free
// was taken, a minute later, before the README's gateway bound it ("bind:
// address already in use"), by another test's listener or by the source
// port of one of the many connections the other packages make, all drawn
// from that range. Ports below it are drawn by nothing else here.
const (
	readmePortLow  = 20000 // freePort's, to 29999
	clusterPortLow = 10000 // clusterPort's, to 19999: their buses 20000 to 29999
)

var (
	pickedMu sync.Mutex
	picked   = map[int]bool{} // handed out by this process: not again
)

// portFree says whether port n is free on the loopback now.
func portFree(n int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(n))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// pickPort returns a port from low to low+9999 that this process has not
// handed out, and that is free, with bus (a cluster node's bus port, its
// port plus 10000) too when asked.
func pickPort(t *testing.T, low int, bus bool) string {
	t.Helper()
	pickedMu.Lock()
	defer pickedMu.Unlock()
	for range 1000 {
		n := low + rand.IntN(10000)
		if picked[n] || bus && picked[n+10000] || !portFree(n) || bus && !portFree(n+10000) {
			continue
		}
		picked[n] = true
		if bus {
			picked[n+10000] = true
		}
		return strconv.Itoa(n)
	}
	t.Fatalf("no free port from %d to %d", low, low+9999)
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	return pickPort(t, readmePortLow, false)
}

// clusterPort returns a free loopback port P whose cluster bus port,
// P+10000, is free too.
func clusterPort(t *testing.T) string {
	t.Helper()
	return pickPort(t, clusterPortLow, true)
}

// gatewayLine matches a line that starts a gateway, and addrFlag its
// --addr.
var (
	gatewayLine = regexp.MustCompile(`^(go run \./cmd/gateway|bin/gateway)\b`)
	addrFlag    = regexp.MustCompile(`--addr (\S+)`)
)

// runBlock runs one block in the shell and returns what it printed.
func (r *readmeRun) runBlock(t *testing.T, b readmeBlock, spec readmeSpec) string {
	t.Helper()
	text := r.ports.Replace(b.text)
	if spec.secondShell {
		r.chunk(t, "( . ./"+r.file(t, text)+" ) >second-shell.out 2>&1 &\nSECOND=$!\n")
		r.waitWaiters(t, r.port["8080"], 1)
		return ""
	}
	var out strings.Builder
	var pending []string // lines not yet sent
	var started []string // addresses of gateways the block starts
	flush := func() {
		if len(pending) > 0 {
			out.WriteString(r.chunk(t, ". ./"+r.file(t, strings.Join(pending, ""))+"\n"))
			pending = nil
		}
	}
	for line := range strings.Lines(text) {
		cmd, _, _ := strings.Cut(line, " #")
		cmd = strings.TrimSpace(cmd)
		if !gatewayLine.MatchString(cmd) {
			pending = append(pending, line)
			continue
		}
		addr := "127.0.0.1:" + r.port["8080"]
		if m := addrFlag.FindStringSubmatch(cmd); m != nil {
			addr = m[1]
		}
		if addr == r.fg {
			// The reader stops the gateway of the terminal of its own
			// (Ctrl-C), as the block says, before starting another there.
			flush()
			r.chunk(t, "kill -INT $FG; wait $FG\n")
			r.fg = ""
		}
		started = append(started, addr)
		if strings.HasSuffix(cmd, "&") {
			pending = append(pending, line)
			continue
		}
		// In a terminal of its own, on the test's port for 8080.
		if !addrFlag.MatchString(cmd) {
			cmd += " --addr " + addr
		}
		flush()
		r.chunk(t, cmd+" >foreground.out 2>foreground.err &\nFG=$!\n")
		r.fg = addr
		r.waitHealthy(t, addr)
		if strings.Contains(cmd, "--dev") {
			r.chunk(t, r.devExport(t)+"\n") // pasted, as the gateway says
		}
	}
	flush()
	for _, addr := range started {
		r.waitHealthy(t, addr)
	}
	if b.index > 0 {
		if prev := readmeSpecs[b.section+"#"+strconv.Itoa(b.index-1)]; prev.secondShell {
			r.chunk(t, "wait $SECOND\n")
			second, err := os.ReadFile(filepath.Join(r.dir, "second-shell.out"))
			if err != nil {
				t.Fatal(err)
			}
			out.Write(second)
		}
	}
	return out.String()
}

// file writes text to a file of its own in the shell's directory.
func (r *readmeRun) file(t *testing.T, text string) string {
	t.Helper()
	r.chunks++
	name := fmt.Sprintf("block-%d.sh", r.chunks)
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// chunk sends text to the shell and returns what it printed on stdout.
func (r *readmeRun) chunk(t *testing.T, text string) string {
	t.Helper()
	r.chunks++
	marker := fmt.Sprintf("::chunk %d done::", r.chunks)
	if _, err := io.WriteString(r.stdin, text+"printf '\\n%s\\n' "+shq(marker)+"\n"); err != nil {
		t.Fatalf("the shell is gone: %v\nstderr: %s", err, r.stderr)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		all := r.stdout.String()
		if i := strings.Index(all[r.readOff:], "\n"+marker+"\n"); i >= 0 {
			got := all[r.readOff : r.readOff+i]
			r.readOff += i + len(marker) + 2
			return strings.TrimPrefix(got, "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not finish within 90s:\n%s\nstdout: %s\nstderr: %s", text, all[r.readOff:], r.stderr)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// devExport is the export lines the --dev gateway printed.
func (r *readmeRun) devExport(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "foreground.err"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "export LOCKGATE_") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("the --dev gateway printed no export line:\n%s", b)
	}
	return strings.Join(lines, "\n")
}

// waitHealthy polls the gateway at addr until it answers /healthz.
func (r *readmeRun) waitHealthy(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			names, _ := filepath.Glob(filepath.Join(r.dir, "*.log"))
			for _, n := range append(names, filepath.Join(r.dir, "foreground.err")) {
				b, _ := os.ReadFile(n)
				fmt.Fprintf(&logs, "%s:\n%s\n", filepath.Base(n), b)
			}
			t.Fatalf("no gateway answers at %s within 30s (%v)\nstderr: %s\nthe logs:\n%s", addr, err, r.stderr, &logs)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
}

// waitWaiters polls the metrics of the gateway on port until n acquirers
// wait.
func (r *readmeRun) waitWaiters(t *testing.T, port string, n int) {
	t.Helper()
	gw := &gateway{URL: "http://127.0.0.1:" + port}
	waitForWaiters(t, gw, n)
}
