package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/jwkstest"
)

// startErr starts the gateway with args, and returns its logs and the
// error Start returned: nil once it listened (it is stopped then).
func startErr(t *testing.T, env map[string]string, args ...string) (logs string, err error) {
	t.Helper()
	var buf lockedBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	g, err := Start(ctx, append(append([]string{}, startArgs...), args...), func(k string) string { return env[k] }, &buf)
	if err == nil {
		g.Stop()
	}
	return buf.String(), err
}

// TestJWKSNeedsAudience: with a JWK Set configured the gateway refuses to
// start without --jwt-audience, and says why: providers sign tokens for
// many relying parties, and a token for another would pass.
func TestJWKSNeedsAudience(t *testing.T) {
	idp := jwkstest.Start(t)
	idp.Set(jwkstest.RSA(t, "k").JWK(t))
	for _, args := range [][]string{
		{"--jwt-jwks-url", idp.URL, "--jwt-issuer", "https://idp.example"},
		{"--jwt-jwks", "https://idp.example=" + idp.URL},
	} {
		if _, err := startErr(t, nil, args...); err == nil || !strings.Contains(err.Error(), "--jwt-audience") {
			t.Errorf("%q: got %v, want a refusal naming --jwt-audience", args, err)
		}
	}
	if logs, err := startErr(t, nil, "--jwt-jwks", "https://idp.example="+idp.URL, "--jwt-audience", "lockgate"); err != nil {
		t.Fatalf("with --jwt-audience: %v\n%s", err, logs)
	}
}

// TestJWKSFlags: what --jwt-jwks, the old --jwt-jwks-url and --jwt-issuer
// accept together, and what they refuse with a line that says why.
func TestJWKSFlags(t *testing.T) {
	idp := jwkstest.Start(t)
	idp.Set(jwkstest.RSA(t, "k").JWK(t))
	secret := map[string]string{"LOCKGATE_JWT_SECRET": "start-test-secret-at-least-32-bytes"}
	aud := []string{"--jwt-audience", "lockgate"}
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string // "" starts
	}{
		"one set":                       {nil, []string{"--jwt-jwks", "https://a.example=" + idp.URL}, ""},
		"two issuers' sets":             {nil, []string{"--jwt-jwks", "https://a.example=" + idp.URL, "--jwt-jwks", "https://b.example=" + idp.URL + "/b"}, ""},
		"the variable takes several":    {map[string]string{"LOCKGATE_JWT_JWKS": "https://a.example=" + idp.URL + " https://b.example=" + idp.URL + "/b"}, nil, ""},
		"old flag with one issuer":      {nil, []string{"--jwt-jwks-url", idp.URL, "--jwt-issuer", "https://a.example"}, ""},
		"old flag, a secret, an issuer": {secret, []string{"--jwt-jwks-url", idp.URL, "--jwt-issuer", "https://a.example"}, ""},
		"old flag without issuer":       {nil, []string{"--jwt-jwks-url", idp.URL}, "--jwt-jwks ISSUER=URL"},
		"old flag, two issuers":         {nil, []string{"--jwt-jwks-url", idp.URL, "--jwt-issuer", "https://a.example", "--jwt-issuer", "https://b.example"}, "--jwt-jwks ISSUER=URL"},
		"no issuer":                     {nil, []string{"--jwt-jwks", idp.URL}, "ISSUER=URL"},
		"no URL":                        {nil, []string{"--jwt-jwks", "https://a.example="}, "ISSUER=URL"},
		"not http":                      {nil, []string{"--jwt-jwks", "https://a.example=ftp://example.com/jwks"}, "--jwt-jwks"},
		"an issuer with #":              {nil, []string{"--jwt-jwks", "https://a.example/#x=" + idp.URL}, "#"},
		"an issuer of no key":           {nil, []string{"--jwt-jwks", "https://a.example=" + idp.URL, "--jwt-issuer", "https://c.example"}, "https://c.example"},
		"the same URL twice":            {nil, []string{"--jwt-jwks", "https://a.example=" + idp.URL, "--jwt-jwks", "https://a.example=" + idp.URL}, "twice"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append(append([]string{}, tc.args...), aud...)
			logs, err := startErr(t, tc.env, args...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want it to start\n%s", err, logs)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("got %v, want a one-line refusal naming %q", err, tc.want)
			}
		})
	}
}

// TestJWTIssuers: --jwt-issuer takes several issuers; a token of any of
// them verifies with the secret, one of another issuer does not.
func TestJWTIssuers(t *testing.T) {
	const secret = "start-test-secret-at-least-32-bytes"
	g, err := Start(t.Context(), append(append([]string{}, startArgs...), "--jwt-issuer", "https://a.example", "--jwt-issuer", "https://b.example"),
		func(k string) string { return map[string]string{"LOCKGATE_JWT_SECRET": secret}[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	for iss, want := range map[string]int{"https://a.example": http.StatusCreated, "https://b.example": http.StatusCreated, "https://c.example": http.StatusUnauthorized, "": http.StatusUnauthorized} {
		c := jwt.MapClaims{"sub": "s", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
		if iss != "" {
			c["iss"] = iss
		}
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
		req, _ := http.NewRequest("POST", g.URL+"/locks/iss/x"+strings.NewReplacer(":", "", "/", "").Replace(iss), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("iss %q: got %d, want %d", iss, resp.StatusCode, want)
		}
	}
}

// TestJWKSPlainHTTPWarned: a JWK Set fetched over plain http from another
// machine is a warning at start: whoever is on the path can swap its keys.
func TestJWKSPlainHTTPWarned(t *testing.T) {
	idp := jwkstest.Start(t)
	idp.Set(jwkstest.RSA(t, "k").JWK(t))
	logs, err := startErr(t, nil, "--jwt-jwks", "https://a.example=http://jwks.invalid/keys", "--jwt-jwks", "https://b.example="+idp.URL,
		"--jwt-audience", "lockgate")
	if err != nil {
		t.Fatal(err)
	}
	var warned, loopbackWarned bool
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "plain http") {
			warned = warned || strings.Contains(line, "jwks.invalid")
			loopbackWarned = loopbackWarned || strings.Contains(line, idp.URL)
		}
	}
	if !warned || loopbackWarned {
		t.Fatalf("warned of http://jwks.invalid: %v, of the loopback set: %v; want only the first\n%s", warned, loopbackWarned, logs)
	}
}
