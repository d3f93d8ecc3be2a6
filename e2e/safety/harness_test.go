package safety

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/contract"
	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// secret is the HS256 key of every gateway the suite starts.
const secret = "safety-suite-secret-at-least-32-bytes!"

// gateway is a running lockgate, in this process or as a child process.
type gateway struct {
	URL  string
	logs *gatewaytest.Buffer
	stop func() // idempotent
	proc *os.Process
}

// startGateway runs app.Start in this process on a free loopback port,
// with args after the defaults, and stops it (as SIGTERM would) when the
// test ends.
func startGateway(t *testing.T, args ...string) *gateway {
	t.Helper()
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	gw := gatewaytest.Start(t, env, append([]string{"--log-level", "warn"}, args...)...)
	g := &gateway{URL: gw.URL, logs: gw.Logs}
	g.stop = func() {
		if err := gw.Stop(); err != nil {
			t.Errorf("gateway: %v", err)
		}
	}
	return g
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// gatewayBinary builds ./cmd/gateway once per test binary, into a
// temporary directory that TestMain removes.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "lockgate-safety-"); buildErr != nil {
			return
		}
		binPath = binDir + "/gateway"
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/lockgate/lockgate/cmd/gateway").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func removeBinaries() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// startGatewayProcess runs the gateway binary as a child process (so that
// it can be killed or stopped like a real one), on a free loopback port.
// The secret goes in the environment, not on the command line.
func startGatewayProcess(t *testing.T, args ...string) *gateway {
	t.Helper()
	bin := gatewayBinary(t)
	argv := append([]string{"--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(os.Environ(), "LOCKGATE_JWT_SECRET="+secret)
	g := &gateway{logs: &gatewaytest.Buffer{}}
	cmd.Stderr = g.logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.proc = cmd.Process
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	g.stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to die
			cmd.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(g.stop)
	abort := time.AfterFunc(30*time.Second, g.stop) // killing it ends WaitListening
	g.URL, err = app.WaitListening(out)
	if !abort.Stop() {
		t.Fatalf("gateway did not listen within 30s; logs:\n%s", g.logs)
	}
	if err != nil {
		t.Fatalf("%v; logs:\n%s", err, g.logs)
	}
	return g
}

// token signs a JWT for every namespace, which it administers (the fault
// matrix's semaphore holders resize), valid for an hour.
func token(t testing.TB) string {
	t.Helper()
	return signToken(t, jwt.MapClaims{"sub": "safety", "ns": []string{"*"}, "ns_admin": []string{"*"}})
}

// adminToken is a token of another subject that also administers every
// namespace: the breaker's, which breaks locks.
func adminToken(t testing.TB) string {
	t.Helper()
	return signToken(t, jwt.MapClaims{"sub": "safety-admin", "ns": []string{"*"}, "ns_admin": []string{"*"}})
}

func signToken(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// client talks to one gateway with its own connections, closed when the
// test ends (so that goleak sees no idle connection goroutines).
type client struct {
	base  string
	auth  string
	admin string // the Authorization of an administrator (adminToken)
	http  *http.Client
}

func newClient(t *testing.T, g *gateway) *client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{base: g.URL, auth: "Bearer " + token(t), admin: "Bearer " + adminToken(t),
		http: &http.Client{Transport: tr, Timeout: 90 * time.Second}}
}

// result is one answer: status 0 means the call failed (err says why).
type result struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return strconv.Itoa(r.status) + " " + strings.TrimSpace(string(r.body))
}

// code is the problem code of an error answer.
func (r result) code() string {
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal(r.body, &p)
	return p.Code
}

// detailOf is the problem detail of r when status (r's, as the caller
// read it) is 503: what the gateway knows of the outcome; else "".
func (r result) detailOf(status int) string {
	if status != http.StatusServiceUnavailable {
		return ""
	}
	var p struct {
		Detail string `json:"detail"`
	}
	json.Unmarshal(r.body, &p)
	return p.Detail
}

// reason is the reason of a not_holder answer.
func (r result) reason() string {
	var p struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(r.body, &p)
	return p.Reason
}

// breakLock breaks lock as an administrator, with a break period unless
// 0.
func (c *client) breakLock(ctx context.Context, lock string, period time.Duration) result {
	body := ""
	if period > 0 {
		body = fmt.Sprintf(`{"break_period_ms":%d}`, period.Milliseconds())
	}
	return c.do(ctx, "POST", "/locks/"+lock+"/break", body, "Authorization", c.admin, "Content-Type", "application/json")
}

func (c *client) do(ctx context.Context, method, path, body string, headers ...string) result {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Authorization", c.auth)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		if cerr := contract.Check(ctx, req, resp.StatusCode, resp.Header, b); cerr != nil {
			noteBreach(cerr)
		}
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// breaches are the answers that broke openapi.yaml (contract.Check), for
// TestMain to fail the run on: the tests here read status codes under
// faults, and a breach must not pass for an unknown outcome.
var breaches struct {
	mu   sync.Mutex
	errs []error
}

func noteBreach(err error) {
	breaches.mu.Lock()
	defer breaches.mu.Unlock()
	breaches.errs = append(breaches.errs, err)
}

// grant is a 201 (acquire) or 200 (renew) body.
type grant struct {
	Lock         string    `json:"lock"`
	Token        string    `json:"token"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	Holds        int       `json:"holds"` // of a re-entrant grant; 0 when not said
	Hold         string    `json:"hold"`  // a re-entry's hold id
	// HoldUntil is a capped grant's hold_until (max_hold_ms); nil when
	// not said.
	HoldUntil *time.Time `json:"hold_until"`
}

func (c *client) acquire(ctx context.Context, lock string, ttl, wait time.Duration) (grant, result) {
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d}`, ttl.Milliseconds(), wait.Milliseconds())
	r := c.do(ctx, "POST", "/locks/"+lock, body)
	var g grant
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

func (c *client) renew(ctx context.Context, lock, tok string, ttl time.Duration) (grant, result) {
	r := c.do(ctx, "PUT", "/locks/"+lock+"/lease", fmt.Sprintf(`{"ttl_ms":%d}`, ttl.Milliseconds()), "Lock-Token", tok)
	var g grant
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

func (c *client) release(ctx context.Context, lock, tok string) result {
	return c.do(ctx, "DELETE", "/locks/"+lock, "", "Lock-Token", tok)
}

// holder returns the fencing token of the lock's holder, 0 when free.
func (c *client) holder(t *testing.T, lock string) int64 {
	t.Helper()
	r := c.do(t.Context(), "GET", "/locks/"+lock, "")
	switch r.status {
	case http.StatusNotFound:
		return 0
	case http.StatusOK:
		var info struct {
			FencingToken int64 `json:"fencing_token"`
		}
		if err := json.Unmarshal(r.body, &info); err != nil {
			t.Fatalf("inspect %s: %v", lock, err)
		}
		return info.FencingToken
	}
	t.Fatalf("inspect %s: %s", lock, r)
	return 0
}

// mustAcquire takes lock or fails the test.
func (c *client) mustAcquire(t *testing.T, lock string, ttl time.Duration) grant {
	t.Helper()
	g, r := c.acquire(t.Context(), lock, ttl, 0)
	if r.status != http.StatusCreated || r.err != nil {
		t.Fatalf("acquire %s: %s", lock, r)
	}
	return g
}

// metric reads one unlabelled value from the gateway's /metrics; -1 when
// absent.
func metric(t *testing.T, g *gateway, name string) float64 {
	t.Helper()
	resp, err := noKeepAlive.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// noKeepAlive leaves no idle connection (nor its goroutines) behind.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

// eventually polls cond every few ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// mustDecode decodes r's JSON body into v.
func mustDecode(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

const (
	sigstop = syscall.SIGSTOP
	sigcont = syscall.SIGCONT
	sigkill = syscall.SIGKILL
)
