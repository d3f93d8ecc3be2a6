package clients

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// secret is the HS256 key of the gateways these tests start.
const secret = "clients-e2e-secret-at-least-32-bytes"

// examples is the examples directory, from this package's.
var examples = filepath.Join("..", "..", "examples")

// gateway is one app.Start in this process, backed by its own redis-server.
type gateway struct {
	URL   string
	Redis *redistest.Server
}

// startGateway starts a redis-server and a gateway on it, both stopped
// when the test ends.
func startGateway(t *testing.T) *gateway {
	t.Helper()
	return startGatewayEnv(t, nil)
}

// startGatewayEnv is startGateway with more environment: the flags of
// callbacks, say.
func startGatewayEnv(t *testing.T, more map[string]string) *gateway {
	t.Helper()
	rs := redistest.Start(t)
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	for k, v := range more {
		env[k] = v
	}
	// These tests check what the clients do, not how a gateway bounds a
	// Redis that stalls: on a busy machine a call took longer than the
	// default 2 s ("TestNodeClientNames: got 503 backend_unavailable the
	// lock backend did not answer in time" at load 10-15).
	g := gatewaytest.Start(t, env, "--log-level", "warn", "--redis-url", rs.URL(), "--redis-timeout", "10s")
	return &gateway{URL: g.URL, Redis: rs}
}

// jwtFor signs a token for every namespace, as sub "tester".
func jwtFor(t *testing.T) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "tester", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

// grant is an acquire's 201 body.
type grant struct {
	Lock         string `json:"lock"`
	Token        string `json:"token"`
	FencingToken int64  `json:"fencing_token"`
}

// acquire takes lock over HTTP for ttl, as another client would, and
// returns the status and the grant.
func (g *gateway) acquire(t *testing.T, lock string, ttl time.Duration) (int, grant) {
	t.Helper()
	body := `{"ttl_ms":` + jsonInt(ttl.Milliseconds()) + `}`
	status, data := g.call(t, "POST", lock, body, "")
	var gr grant
	if status == http.StatusCreated {
		if err := json.Unmarshal(data, &gr); err != nil {
			t.Fatalf("decode grant %s: %v", data, err)
		}
	}
	return status, gr
}

// held reports whether lock is held, by inspecting it over HTTP.
func (g *gateway) held(t *testing.T, lock string) bool {
	t.Helper()
	status, data := g.call(t, "GET", lock, "", "")
	switch status {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("inspect %s: %d %s", lock, status, data)
	return false
}

// metrics returns the gateway's /metrics text, or "" when it did not answer.
func (g *gateway) metrics() string {
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// wantMetrics fails t unless the gateway's /metrics has each of want.
func (g *gateway) wantMetrics(t *testing.T, want ...string) {
	t.Helper()
	m := g.metrics()
	for _, w := range want {
		if !strings.Contains(m, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func (g *gateway) call(t *testing.T, method, lock, body, lockToken string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, g.URL+"/locks/"+lock, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+jwtFor(t))
	if lockToken != "" {
		req.Header.Set("Lock-Token", lockToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, lock, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// proc is a client program started by a test.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *gatewaytest.Buffer
	exited         chan struct{}
}

// start runs cmd in a process group of its own, with LOCKGATE_URL and
// LOCKGATE_TOKEN for gw plus env, and kills the group by its PID when the
// test ends, in case it is still running.
func start(t *testing.T, gw *gateway, cmd *exec.Cmd, env ...string) *proc {
	t.Helper()
	cmd.Env = append(os.Environ(), "LOCKGATE_URL="+gw.URL, "LOCKGATE_TOKEN="+jwtFor(t))
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd, stdout: &gatewaytest.Buffer{}, stderr: &gatewaytest.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH once it is all gone
		<-p.exited
	})
	return p
}

// wait waits for the program to exit and returns its exit code.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s\nstdout: %s\nstderr: %s", p.cmd.Path, within, p.stdout, p.stderr)
		return -1
	}
}

// waitOutput polls until the program's stdout contains s.
func (p *proc) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.stdout.String(), s) {
		select {
		case <-p.exited:
			if strings.Contains(p.stdout.String(), s) {
				return
			}
			t.Fatalf("%s exited without printing %q\nstdout: %s\nstderr: %s", p.cmd.Path, s, p.stdout, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within 30s\nstdout: %s\nstderr: %s", p.cmd.Path, s, p.stdout, p.stderr)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// noSecrets fails the test if the program's output shows the JWT.
func (p *proc) noSecrets(t *testing.T) {
	t.Helper()
	for _, kv := range p.cmd.Env {
		if tok, ok := strings.CutPrefix(kv, "LOCKGATE_TOKEN="); ok && strings.Contains(p.stdout.String()+p.stderr.String(), tok) {
			t.Errorf("%s printed the JWT", p.cmd.Path)
		}
	}
}

// lookPaths skips the test unless every tool is installed.
func lookPaths(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; these tests run the examples with %s", tool, strings.Join(tools, ", "))
		}
	}
}
