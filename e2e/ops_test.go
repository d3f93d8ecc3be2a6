package e2e

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
)

func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	var h struct{ Status string }
	wantJSON(t, call(t, "GET", gw.URL+"/healthz", ""), http.StatusOK, &h)
	if h.Status != "ok" {
		t.Fatalf("healthz: got %q", h.Status)
	}
	wantJSON(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusOK, &h)

	spec := call(t, "GET", gw.URL+"/openapi.yaml", "")
	for _, want := range []string{"openapi: 3.0.3", "/locks/{namespace}/{name}:", "/locks/{namespace}/{name}/lease:", "bearerAuth"} {
		if spec.status != http.StatusOK || !strings.Contains(string(spec.body), want) {
			t.Fatalf("/openapi.yaml: got %d, want 200 with %q", spec.status, want)
		}
	}

	acquire(t, gw.URL+"/locks/m/x", "")
	call(t, "POST", gw.URL+"/locks/m/x", "", bearer(token(t, nil))...)
	m := string(call(t, "GET", gw.URL+"/metrics", "").body)
	for _, want := range []string{
		`lockgate_http_requests_total{code="201",method="POST",route="/locks/{namespace}/{name}"} 1`,
		`lockgate_http_requests_total{code="409",method="POST",route="/locks/{namespace}/{name}"} 1`,
		`lockgate_acquires_total{outcome="granted"} 1`,
		`lockgate_acquires_total{outcome="held"} 1`,
		`lockgate_active_waiters 0`,
		`lockgate_acquire_wait_seconds_count 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestLogsHoldNoSecrets: after a full session, the logs hold no JWT, no
// owner token and no Lock-Token, whatever the outcome of each call.
func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--log-level", "debug")
	tok := token(t, nil)
	url := gw.URL + "/locks/secrets/x"
	g := acquire(t, url, "")
	secrets := []string{tok, g.Token, "forged-lock-token", "wrong-jwt-payload"}
	call(t, "POST", url, "", bearer(tok)...)                                             // 409
	call(t, "DELETE", url, "", with(bearer(tok), []string{"Lock-Token", secrets[2]})...) // 409 not_holder
	call(t, "PUT", url+"/lease", "", with(bearer(tok), []string{"Lock-Token", g.Token})...)
	call(t, "GET", url, "", "Authorization", "Bearer a."+secrets[3]+".c") // 401
	call(t, "GET", url+"?token="+g.Token, "", bearer(tok)...)             // a careless query string
	call(t, "DELETE", url, "", with(bearer(tok), []string{"Lock-Token", g.Token})...)
	if err := gw.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	logs := gw.logs.String()
	if !strings.Contains(logs, `"path":"/locks/secrets/x"`) {
		t.Fatalf("the access log is missing; logs:\n%s", logs)
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain a secret %.12s...", s)
		}
	}
	for _, s := range []string{"Bearer", "eyJ", "Lock-Token", "Authorization"} {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %q", s)
		}
	}
}

// TestShutdownTurnsWaitersAway: on shutdown a waiting acquirer gets a 503
// at once, the holder's lock is untouched, and Run returns cleanly.
func TestShutdownTurnsWaitersAway(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/drain/x"
		acquire(t, url, `{"ttl_ms":60000}`)
		got := callAsync(t, "POST", url, `{"wait_ms":60000}`, bearer(token(t, nil))...)
		waitForWaiters(t, gw, 1)

		stopped := make(chan error, 1)
		go func() { stopped <- gw.stop() }()
		select {
		case r := <-got:
			wantProblem(t, r, http.StatusServiceUnavailable, "backend_unavailable")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not turned away within 10s of shutdown")
		}
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return within 15s of shutdown")
		}
	})
}

func TestRefusesToStart(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no key":           {nil, nil, "no JWT key configured"},
		"both keys":        {[]string{"--jwt-secret", secret, "--jwt-public-key-file", "k.pem"}, nil, "not both"},
		"short secret":     {nil, map[string]string{"LOCKGATE_JWT_SECRET": "short"}, "at least 32 bytes"},
		"secret, newline":  {nil, map[string]string{"LOCKGATE_JWT_SECRET": secret + "\n"}, "whitespace"},
		"one-byte secret":  {[]string{"--jwt-secret", strings.Repeat("x", 40)}, nil, "too weak"},
		"repeated secret":  {nil, map[string]string{"LOCKGATE_JWT_SECRET": strings.Repeat("changeme", 5)}, "too weak"},
		"missing key file": {[]string{"--jwt-public-key-file", filepath.Join(t.TempDir(), "nope.pem")}, nil, "--jwt-public-key-file"},
		"bad env duration": {nil, map[string]string{"LOCKGATE_JWT_SECRET": secret, "LOCKGATE_MAX_TTL": "forever"}, "LOCKGATE_MAX_TTL"},
		"default over max": {[]string{"--default-ttl", "2h"}, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "--max-ttl"},
		"no retention":     {[]string{"--fence-retention", "0s"}, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "durations must be positive"},
		"bad log level":    {[]string{"--log-level", "loud"}, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "--log-level"},
		"stray argument":   {[]string{"serve"}, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "unexpected argument"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, logs gatewaytest.Buffer
			args := append([]string{"gateway", "--addr", "127.0.0.1:0"}, tc.args...)
			err := app.Run(t.Context(), args, func(k string) string { return tc.env[k] }, &out, &logs)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want a one-line error mentioning %q", err, tc.want)
			}
			if strings.Contains(out.String(), app.ListeningPrefix) {
				t.Fatal("it listened anyway")
			}
			for _, s := range []string{secret, `"short"`, "xxxxxxxx", "changeme"} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("the error quotes the secret: %v", err)
				}
			}
		})
	}
}

// TestBinaryDevModeAndSIGTERM builds the gateway, runs it with --dev, uses
// the token it prints on stderr, and stops it with SIGTERM.
func TestBinaryDevModeAndSIGTERM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--dev", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "LOCKGATE_JWT_SECRET=") // only what --dev makes
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs gatewaytest.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Kill() // by PID; a no-op once it has exited
		<-exited
	})

	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	var url string
	var stdoutLines []string
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("the gateway exited early; logs:\n%s", logs.String())
		}
		stdoutLines = append(stdoutLines, l)
		url, _ = strings.CutPrefix(l, app.ListeningPrefix)
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line within 30s; logs:\n%s", logs.String())
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line on stdout %q: want the listening line on loopback", stdoutLines[0])
	}
	// The token and the curl example are on stderr, after a warning. The
	// process writes them before the listening line, but stderr reaches
	// logs through a pipe of its own: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "\ncurl ") {
		if time.Now().After(deadline) {
			t.Fatalf("no curl example on stderr within 30s; got:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
	var tok, curl string
	warned := false
	for l := range strings.Lines(logs.String()) {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, "export LOCKGATE_TOKEN="); ok {
			tok = rest
		}
		if strings.HasPrefix(l, "curl ") {
			curl = l
		}
		if strings.HasPrefix(l, "WARNING: lockgate --dev is not for production") {
			warned = tok == "" // before the token
		}
		if strings.HasPrefix(l, "{") && tok != "" && strings.Contains(l, tok) {
			t.Error("the dev token is in a JSON log line")
		}
	}
	if tok == "" || curl == "" || !warned {
		t.Fatalf("want a warning, then a token and a curl example on stderr; got:\n%s", logs.String())
	}
	if !regexp.MustCompile(`\$LOCKGATE_TOKEN.*` + regexp.QuoteMeta(url) + `/locks/`).MatchString(curl) {
		t.Fatalf("curl example %q does not use the token and %s", curl, url)
	}
	for _, ns := range []string{"demo", "anything-else"} {
		if r := call(t, "POST", url+"/locks/"+ns+"/x", `{"ttl_ms":5000}`, bearer(tok)...); r.status != http.StatusCreated {
			t.Fatalf("the dev token on %s: got %d %s, want 201", ns, r.status, r.body)
		}
	}
	if !strings.Contains(logs.String(), "embedded in-memory backend") {
		t.Errorf("no single-process warning in the logs:\n%s", logs.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	for l := range lines { // closed before exited was sent
		stdoutLines = append(stdoutLines, l)
	}
	if len(stdoutLines) != 1 {
		t.Fatalf("stdout: got %q, want the listening line only", stdoutLines)
	}
}

// TestHandoffMetric: a grant handed over from the queue shows in the
// hand-off histogram; a grant taken directly does not.
func TestHandoffMetric(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/m/handoff"
		held := acquire(t, url, `{"ttl_ms":60000}`)
		got := callAsync(t, "POST", url, `{"wait_ms":20000}`, bearer(token(t, nil))...)
		waitForQueued(t, url, 1) // queued, so that the release hands over
		call(t, "DELETE", url, "", with(bearer(token(t, nil)), []string{"Lock-Token", held.Token})...)
		wantJSON(t, <-got, http.StatusCreated, &grant{})
		m := string(call(t, "GET", gw.URL+"/metrics", "").body)
		if !strings.Contains(m, "lockgate_handoff_seconds_count 1\n") {
			t.Fatalf("/metrics: want one hand-off counted; got:\n%s", m)
		}
	})
}
