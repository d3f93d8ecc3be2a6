package clients

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// verifier is one of the examples that check a signed grant offline, as
// the protected resource would: a command line, the JWS on its stdin.
// cmd skips the test when the verifier's runtime is missing.
type verifier struct {
	name string
	cmd  func(t *testing.T) func(args ...string) *exec.Cmd
}

var verifiers = []verifier{
	{"go", func(t *testing.T) func(args ...string) *exec.Cmd {
		bin := filepath.Join(programs(t), "verifygrant")
		return func(args ...string) *exec.Cmd { return exec.Command(bin, args...) }
	}},
	{"python", func(t *testing.T) func(args ...string) *exec.Cmd {
		lookPaths(t, "python3")
		if exec.Command("python3", "-c", "import cryptography").Run() != nil {
			t.Skip("python3 has no cryptography package (Debian: python3-cryptography); the Python verifier needs it")
		}
		return func(args ...string) *exec.Cmd {
			return exec.Command("python3", append([]string{"-B", filepath.Join(examples, "python", "verify_grant.py")}, args...)...)
		}
	}},
	{"node", func(t *testing.T) func(args ...string) *exec.Cmd {
		nodeProgram(t) // builds dist, or skips
		return func(args ...string) *exec.Cmd {
			cmd := exec.Command("node", append([]string{filepath.Join("dist", "verify-grant.js")}, args...)...)
			cmd.Dir = nodeDir
			return cmd
		}
	}},
}

// TestVerifyGrantOffline: each verifier example accepts a live grant of a
// real gateway, checked against the gateway's JWK Set with no other call,
// and rejects a grant whose lease has ended, one signed by another
// gateway's key, one of another deployment that shares the key file (its
// iss), one of another lock, a shared hold, and a fencing token that is
// not larger than the last accepted.
func TestVerifyGrantOffline(t *testing.T) {
	startBuild()
	startNodeBuild()
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "grant-keys.pem")
	k, err := grantsig.Generate()
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := grantsig.EncodePrivate(k)
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	a := &gateway{URL: gatewaytest.Start(t, env, "--log-level", "warn", "--grant-keys", keyFile).URL}
	other := &gateway{URL: gatewaytest.Start(t, env, "--log-level", "warn").URL} // a key of its own
	// Another deployment that shares the key file: its grants verify with
	// the same keys, and only their iss tells them apart.
	staging := &gateway{URL: gatewaytest.Start(t, env, "--log-level", "warn", "--grant-keys", keyFile, "--grant-issuer", "staging").URL}
	jwks := a.URL + "/.well-known/lockgate/jwks.json"

	signed := func(g *gateway, lock, body string) (string, int64, time.Time) {
		t.Helper()
		status, data := g.call(t, "POST", lock, body, "")
		var gr struct {
			FencingToken int64     `json:"fencing_token"`
			ExpiresAt    time.Time `json:"expires_at"`
			SignedGrant  string    `json:"signed_grant"`
		}
		if status != http.StatusCreated || json.Unmarshal(data, &gr) != nil || gr.SignedGrant == "" {
			t.Fatalf("acquire %s: %d %s, want 201 with a signed_grant", lock, status, data)
		}
		return gr.SignedGrant, gr.FencingToken, gr.ExpiresAt
	}
	live, fence, _ := signed(a, "verify/live", `{"ttl_ms":600000,"signed":true}`)
	ended, _, endedAt := signed(a, "verify/ended", `{"ttl_ms":300,"signed":true}`)
	foreign, foreignFence, _ := signed(other, "verify/live", `{"ttl_ms":600000,"signed":true}`)
	shared, sharedFence, _ := signed(a, "verify/shared", `{"ttl_ms":600000,"mode":"shared","signed":true}`)
	staged, stagedFence, _ := signed(staging, "verify/live", `{"ttl_ms":600000,"signed":true}`)
	// The short lease ends: wait for the clock, not for an event.
	for time.Now().Before(endedAt.Add(50 * time.Millisecond)) {
		time.Sleep(time.Until(endedAt.Add(50 * time.Millisecond)))
	}
	last := strconv.FormatInt(fence-1, 10)
	cases := []struct {
		name, jws, lock, last, want string
	}{
		{"live", live, "verify/live", last, "accepted fencing_token=" + strconv.FormatInt(fence, 10)},
		{"stale fencing token", live, "verify/live", strconv.FormatInt(fence, 10), "rejected: fencing token"},
		{"lease ended", ended, "verify/ended", "0", "rejected: the lease has ended"},
		{"another gateway's key", foreign, "verify/live", strconv.FormatInt(foreignFence-1, 10), "rejected: signed by a key the gateway does not publish"},
		{"another lock", live, "verify/other", last, "rejected: a grant of"},
		{"a shared hold", shared, "verify/shared", strconv.FormatInt(sharedFence-1, 10), "rejected: a shared hold"},
		{"tampered", tamper(live), "verify/live", last, "rejected:"},
		{"another deployment's iss", staged, "verify/live", strconv.FormatInt(stagedFence-1, 10), `rejected: issued by "staging" (iss)`},
	}
	for _, v := range verifiers {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			verify := v.cmd(t)
			for _, c := range cases {
				// Each case is a process of its own, with nothing to share
				// but the gateways' keys.
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					cmd := verify(jwks, "lockgate", c.lock, c.last)
					cmd.Stdin = strings.NewReader(c.jws + "\n")
					out, err := cmd.Output()
					code := 0
					if ee, ok := err.(*exec.ExitError); ok {
						code = ee.ExitCode()
					} else if err != nil {
						t.Fatal(err)
					}
					wantCode := 1
					if strings.HasPrefix(c.want, "accepted") {
						wantCode = 0
					}
					if code != wantCode || !strings.HasPrefix(strings.TrimSpace(string(out)), c.want) {
						t.Errorf("exit %d, %q; want exit %d, %q...", code, out, wantCode, c.want)
					}
				})
			}
		})
	}
}

// tamper raises the fencing token in a JWS's payload, keeping its
// signature: what a stale holder would try.
func tamper(jws string) string {
	parts := strings.Split(jws, ".")
	p, _ := base64URL.DecodeString(parts[1])
	var claims map[string]any
	json.Unmarshal(p, &claims)
	claims["fencing_token"] = claims["fencing_token"].(float64) + 1000
	p, _ = json.Marshal(claims)
	parts[1] = base64URL.EncodeToString(p)
	return strings.Join(parts, ".")
}

var base64URL = base64.RawURLEncoding
