package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/contract"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// secret is the HS256 key of the gateways these tests start.
const secret = "e2e-secret-that-is-at-least-32-bytes-long"

// backend is one way to run the gateway's lock store.
type backend struct {
	name string
	// args starts what the backend needs and returns the gateway flags
	// that select it.
	args func(t *testing.T) []string
}

var backends = []backend{
	{name: "memory", args: func(*testing.T) []string { return nil }},
	{name: "redis", args: func(t *testing.T) []string {
		return []string{"--redis-url", redistest.Start(t).URL()}
	}},
}

// eachBackend runs f once per backend, as a subtest.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// gateway is one app.Start in this process.
type gateway struct {
	URL  string
	logs *gatewaytest.Buffer
	gw   *app.Gateway
}

// startGateway runs the gateway on a free loopback port with the test
// secret (from the environment, as production would set it) and extra
// flags, and stops it when the test ends.
func startGateway(t *testing.T, args ...string) *gateway {
	t.Helper()
	return startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_SECRET": secret}, args...)
}

func startGatewayEnv(t *testing.T, env map[string]string, args ...string) *gateway {
	t.Helper()
	g := gatewaytest.Start(t, env, append([]string{"--log-level", "debug"}, args...)...)
	return &gateway{URL: g.URL, logs: g.Logs, gw: g.Gateway}
}

// stop shuts the gateway down as SIGTERM does and returns what Run
// returned. It is safe to call more than once, and from any goroutine.
func (g *gateway) stop() error { return g.gw.Stop() }

// token signs an HS256 JWT with the test secret: sub "tester", every
// namespace, an hour to live, unless claims says otherwise.
func token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "tester", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

// response is what a call returned.
type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request and fails the test if it cannot. body "" sends
// no body; headers are name, value pairs. It never sets a Content-Type
// unless asked, like curl -d.
func call(t *testing.T, method, url, body string, headers ...string) response {
	t.Helper()
	r, err := send(t.Context(), method, url, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// callAsync sends one request from another goroutine (where t.Fatal must
// not be called); a failure arrives as status 0 with the error as body.
func callAsync(t *testing.T, method, url, body string, headers ...string) <-chan response {
	got := make(chan response, 1)
	go func() {
		r, err := send(t.Context(), method, url, body, headers...)
		if err != nil {
			r = response{body: []byte(err.Error())}
		}
		got <- r
	}()
	return got
}

func send(ctx context.Context, method, url, body string, headers ...string) (response, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return response{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	if err := contract.Check(ctx, req, resp.StatusCode, resp.Header, b); err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// bearer returns the Authorization header pair for tok.
func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func with(pairs ...[]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, p...)
	}
	return out
}

// problem is an RFC 9457 body as lockgate sends it.
type problem struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail"`
	Code         string `json:"code"`
	RetryAfterMs *int64 `json:"retry_after_ms"`
	Reason       string `json:"reason"`
}

// wantProblem checks that r is a problem with status and code, and returns it.
func wantProblem(t *testing.T, r response, status int, code string) problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status: got %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	var p problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	if p.Code != code || p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem: got %+v, want code %q, status %d and every field set", p, code, status)
	}
	return p
}

// wantJSON checks the status and decodes a JSON body into v.
func wantJSON(t *testing.T, r response, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status: got %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type: got %q, want application/json", ct)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// grant is a 201 body (or a re-entry's 200).
type grant struct {
	Lock         string    `json:"lock"`
	Token        string    `json:"token"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	Holds        int       `json:"holds"`
	Hold         string    `json:"hold"` // a re-entry's
	Mode         string    `json:"mode"`
}

// acquire takes url's lock with body and fails the test unless it gets it.
func acquire(t *testing.T, url, body string) grant {
	t.Helper()
	var g grant
	wantJSON(t, call(t, "POST", url, body, bearer(token(t, nil))...), http.StatusCreated, &g)
	return g
}
