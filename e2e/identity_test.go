package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/jwkstest"
)

// rawToken signs payload, a JSON text kept byte for byte (duplicate keys,
// odd spellings), as an HS256 token with the test secret.
func rawToken(payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestClaimNamesExact: only a claim spelled "ns" grants namespaces and
// only "exp" is the expiry; a payload that names a key twice is refused.
func TestClaimNamesExact(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for name, tc := range map[string]struct {
		payload string
		status  int
		code    string
	}{
		"ns":       {`{"sub":"s","exp":` + exp + `,"ns":["exact"]}`, http.StatusCreated, ""},
		"NS":       {`{"sub":"s","exp":` + exp + `,"NS":["exact"]}`, http.StatusForbidden, "forbidden"},
		"Ns":       {`{"sub":"s","exp":` + exp + `,"Ns":["exact"]}`, http.StatusForbidden, "forbidden"},
		"long s":   {`{"sub":"s","exp":` + exp + `,"nſ":["exact"]}`, http.StatusForbidden, "forbidden"},
		"EXP":      {`{"sub":"s","EXP":` + exp + `,"ns":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
		"ns twice": {`{"sub":"s","exp":` + exp + `,"ns":["other"],"ns":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
		"escaped":  {`{"sub":"s","exp":` + exp + `,"ns":["other"],"n\u0073":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", gw.URL+"/locks/exact/"+strings.ReplaceAll(name, " ", "-"), "", bearer(rawToken(tc.payload))...)
			if tc.code == "" {
				if r.status != tc.status {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tc.status)
				}
				return
			}
			wantProblem(t, r, tc.status, tc.code)
		})
	}
}

// pollUntil calls ok until it returns true, failing the test after a
// generous deadline.
func pollUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oidcClaims are what an identity provider would sign for a CI job.
func oidcClaims(extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": "https://issuer.example", "aud": "lockgate", "sub": "repo:acme/app:ref:refs/heads/main",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// TestJWKS: a gateway trusting a JWK Set (and no secret) accepts RS256 and
// ES256 tokens from it, follows a key rotation, and refuses what the set
// does not vouch for. It is configured with the old --jwt-jwks-url and one
// --jwt-issuer, which says whose the set is.
func TestJWKS(t *testing.T) {
	t.Parallel()
	r1, e1, r2 := jwkstest.RSA(t, "r1"), jwkstest.ES256(t, "e1"), jwkstest.RSA(t, "r2")
	idp := jwkstest.Start(t)
	idp.Set(r1.JWK(t), e1.JWK(t))
	gw := startGatewayEnv(t, nil, "--jwt-jwks-url", idp.URL, "--jwt-jwks-refresh", "200ms",
		"--jwt-issuer", "https://issuer.example", "--jwt-audience", "lockgate")
	ns := jwt.MapClaims{"ns": []string{"jwks"}}
	post := func(name, tok string) response {
		return call(t, "POST", gw.URL+"/locks/jwks/"+name, `{"ttl_ms":1000}`, bearer(tok)...)
	}
	der, _ := x509.MarshalPKIXPublicKey(r1.Key.Public())
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hsWithKID := func(key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, oidcClaims(ns))
		tok.Header["kid"] = "r1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	if r := call(t, "GET", gw.URL+"/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("/readyz: got %d %s, want 200", r.status, r.body)
	}
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"RS256":                 {r1.Sign(t, oidcClaims(ns)), true},
		"ES256":                 {e1.Sign(t, oidcClaims(ns)), true},
		"wrong issuer":          {r1.Sign(t, oidcClaims(jwt.MapClaims{"ns": []string{"jwks"}, "iss": "https://evil.example"})), false},
		"wrong audience":        {r1.Sign(t, oidcClaims(jwt.MapClaims{"ns": []string{"jwks"}, "aud": "other"})), false},
		"HS256 with the secret": {signHS(t, jwt.SigningMethodHS256, oidcClaims(ns)), false},
		"HS256 keyed with PEM":  {hsWithKID(pemKey), false},
		"alg none":              {algNone(t, oidcClaims(ns)), false},
		"kid not published yet": {r2.Sign(t, oidcClaims(ns)), false},
	} {
		t.Run(name, func(t *testing.T) {
			r := post(strings.ReplaceAll(name, " ", "-"), tc.token)
			if tc.ok {
				if r.status != http.StatusCreated {
					t.Fatalf("got %d %s, want 201", r.status, r.body)
				}
				return
			}
			wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		})
	}

	t.Run("rotation", func(t *testing.T) {
		oldTok, newTok := r1.Sign(t, oidcClaims(ns)), r2.Sign(t, oidcClaims(ns))
		if r := post("rot-old", oldTok); r.status != http.StatusCreated {
			t.Fatalf("old key before the rotation: got %d %s, want 201", r.status, r.body)
		}
		idp.Set(r1.JWK(t), r2.JWK(t), e1.JWK(t))
		pollUntil(t, "the new kid is accepted", func() bool { return post("rot-new", newTok).status == http.StatusCreated })
		idp.Set(r2.JWK(t), e1.JWK(t))
		pollUntil(t, "the removed kid is refused", func() bool { return post("rot-old", oldTok).status == http.StatusUnauthorized })
		wantProblem(t, post("rot-old", oldTok), http.StatusUnauthorized, "unauthorized")
	})
}

// TestJWKSDownAtStart: a gateway whose JWK Set cannot be fetched starts,
// says so on /readyz (503) and refuses the set's tokens, until a later
// fetch succeeds.
func TestJWKSDownAtStart(t *testing.T) {
	t.Parallel()
	k := jwkstest.ES256(t, "k")
	idp := jwkstest.Start(t)
	idp.Set(k.JWK(t))
	idp.Fail(http.StatusBadGateway)
	gw := startGatewayEnv(t, nil, "--jwt-jwks", "https://issuer.example="+idp.URL, "--jwt-jwks-refresh", "100ms", "--jwt-audience", "lockgate")
	p := wantProblem(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusServiceUnavailable, "backend_unavailable")
	if !strings.Contains(p.Detail, "JWK Set") || strings.Contains(p.Detail, idp.URL) {
		t.Fatalf("detail %q: want it to name the JWK Set, not its URL", p.Detail)
	}
	if !strings.Contains(gw.logs.String(), "JWK Set fetch failed") {
		t.Fatalf("no log line says the fetch failed; logs:\n%s", gw.logs)
	}
	tok := k.Sign(t, oidcClaims(jwt.MapClaims{"ns": []string{"*"}}))
	wantProblem(t, call(t, "POST", gw.URL+"/locks/down/x", "", bearer(tok)...), http.StatusUnauthorized, "unauthorized")
	idp.Fail(0)
	pollUntil(t, "/readyz answers 200", func() bool { return call(t, "GET", gw.URL+"/readyz", "").status == http.StatusOK })
	if r := call(t, "POST", gw.URL+"/locks/down/x", "", bearer(tok)...); r.status != http.StatusCreated {
		t.Fatalf("token once the set loaded: got %d %s, want 201", r.status, r.body)
	}
}

// writePolicy writes a policy file and returns its path.
func writePolicy(t *testing.T, policy string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPolicy: CI tokens without an ns claim get the namespaces of every
// rule their claims match, under the smallest max_ttl of those rules; a
// token that matches no rule gets 403 on every lock.
func TestPolicy(t *testing.T) {
	t.Parallel()
	k := jwkstest.RSA(t, "ci")
	idp := jwkstest.Start(t)
	idp.Set(k.JWK(t))
	policy := writePolicy(t, `{"rules": [
		{"match": {"iss": "https://issuer.example", "repository": "acme/*"}, "namespaces": ["deploy-*"], "max_ttl": "10m"},
		{"match": {"repository": "acme/app", "ref": "refs/heads/main"}, "namespaces": ["prod"], "max_ttl": "2m"},
		{"match": {"repository": "acme/tiny"}, "namespaces": ["tiny"], "max_ttl": "5s"},
		{"match": {"groups": "lock-admins"}, "namespaces": ["*"]}
	]}`)
	gw := startGateway(t, "--jwt-jwks", "https://issuer.example="+idp.URL, "--policy", policy, "--jwt-audience", "lockgate")
	ci := func(claims jwt.MapClaims) []string { return bearer(k.Sign(t, oidcClaims(claims))) }
	lib := ci(jwt.MapClaims{"repository": "acme/lib", "ref": "refs/heads/main"})
	app := ci(jwt.MapClaims{"repository": "acme/app", "ref": "refs/heads/main"})
	tiny := ci(jwt.MapClaims{"repository": "acme/tiny"})
	admin := ci(jwt.MapClaims{"repository": "other/x", "groups": []string{"dev", "lock-admins"}})
	stranger := ci(jwt.MapClaims{"repository": "evil/acme", "ref": "refs/heads/main"})
	withNS := ci(jwt.MapClaims{"repository": "evil/acme", "ns": []string{"own"}})

	for name, tc := range map[string]struct {
		auth   []string
		lock   string
		body   string
		status int
	}{
		"rule grants glob":            {lib, "deploy-web/a", `{"ttl_ms":600000}`, http.StatusCreated},
		"glob is whole":               {lib, "deploy/a", "", http.StatusForbidden},
		"other namespace":             {lib, "prod/a", "", http.StatusForbidden},
		"over max_ttl":                {lib, "deploy-web/b", `{"ttl_ms":600001}`, http.StatusBadRequest},
		"two rules add up":            {app, "prod/a", `{"ttl_ms":120000}`, http.StatusCreated},
		"and the first rule's grant":  {app, "deploy-api/a", "", http.StatusCreated},
		"the smaller max_ttl applies": {app, "deploy-api/b", `{"ttl_ms":120001}`, http.StatusBadRequest},
		"array claim matches":         {admin, "anything/a", `{"ttl_ms":3600000}`, http.StatusCreated},
		"no rule matches":             {stranger, "deploy-web/c", "", http.StatusForbidden},
		"an ns claim is used as is":   {withNS, "own/a", "", http.StatusCreated},
		"an ns claim, not the policy": {withNS, "deploy-web/d", "", http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", gw.URL+"/locks/"+tc.lock, tc.body, tc.auth...)
			switch tc.status {
			case http.StatusCreated:
				var g grant
				wantJSON(t, r, http.StatusCreated, &g)
			case http.StatusForbidden:
				wantProblem(t, r, tc.status, "forbidden")
			case http.StatusBadRequest:
				p := wantProblem(t, r, tc.status, "invalid_request")
				if !strings.Contains(p.Detail, "ttl_ms") {
					t.Fatalf("detail %q does not name ttl_ms", p.Detail)
				}
			}
		})
	}

	t.Run("no rule matches: 403 on every lock operation", func(t *testing.T) {
		url := gw.URL + "/locks/deploy-web/held"
		var g grant
		wantJSON(t, call(t, "POST", url, "", lib...), http.StatusCreated, &g)
		wantProblem(t, call(t, "GET", url, "", stranger...), http.StatusForbidden, "forbidden")
		wantProblem(t, call(t, "DELETE", url, "", with(stranger, []string{"Lock-Token", g.Token})...), http.StatusForbidden, "forbidden")
		wantProblem(t, call(t, "PUT", url+"/lease", "", with(stranger, []string{"Lock-Token", g.Token})...), http.StatusForbidden, "forbidden")
	})
	t.Run("default lease within max_ttl", func(t *testing.T) {
		var g grant
		wantJSON(t, call(t, "POST", gw.URL+"/locks/tiny/a", "", tiny...), http.StatusCreated, &g)
		if g.TTLMs != 5000 {
			t.Fatalf("ttl_ms without ttl_ms in the request: got %d, want 5000 (the rule's max_ttl, under --default-ttl 30s)", g.TTLMs)
		}
	})
	t.Run("renew over max_ttl", func(t *testing.T) {
		url := gw.URL + "/locks/tiny/renew"
		var g grant
		wantJSON(t, call(t, "POST", url, "", tiny...), http.StatusCreated, &g)
		wantProblem(t, call(t, "PUT", url+"/lease", `{"ttl_ms":5001}`, with(tiny, []string{"Lock-Token", g.Token})...), http.StatusBadRequest, "invalid_request")
		if r := call(t, "PUT", url+"/lease", `{"ttl_ms":5000}`, with(tiny, []string{"Lock-Token", g.Token})...); r.status != http.StatusOK {
			t.Fatalf("renew at max_ttl: got %d %s, want 200", r.status, r.body)
		}
	})
}

// TestIdentityRefusesToStart: flags of this kind that cannot work stop the
// gateway before it listens, with a one-line error that says why.
func TestIdentityRefusesToStart(t *testing.T) {
	t.Parallel()
	badRule := writePolicy(t, `{"rules": [
		{"match": {"iss": "https://issuer.example"}, "namespaces": ["a"]},
		{"match": {"iss": "https://issuer.example"}, "namespaces": ["a"], "max_ttl": "ten minutes"}
	]}`)
	unknownField := writePolicy(t, `{"rules": [{"match": {"sub": "*"}, "namespaces": ["a"], "Namespaces": ["*"]}]}`)
	badGlob := writePolicy(t, `{"rules": [{"match": {"sub": "*"}, "namespaces": ["a"]}, {"match": {"sub": "*"}, "namespaces": ["b"]}, {"match": {"sub": "*"}, "namespaces": ["Prod/*"]}]}`)
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"policy: bad duration":  {[]string{"--policy", badRule}, env, "rule 2: max_ttl"},
		"policy: unknown field": {[]string{"--policy", unknownField}, env, `rule 1: unknown field "Namespaces"`},
		"policy: bad glob":      {[]string{"--policy", badGlob}, env, `rule 3: namespace glob "Prod/*"`},
		"policy: missing file":  {[]string{"--policy", filepath.Join(t.TempDir(), "nope.json")}, env, "--policy"},
		"empty ns claim":        {[]string{"--jwt-ns-claim", ""}, env, "--jwt-ns-claim"},
		"JWKS not http":         {[]string{"--jwt-jwks", "https://issuer.example=ftp://example.com/jwks", "--jwt-audience", "lockgate"}, nil, "--jwt-jwks"},
		"JWKS refresh zero":     {[]string{"--jwt-jwks", "https://issuer.example=http://127.0.0.1:1/jwks", "--jwt-jwks-refresh", "0s"}, nil, "positive"},
		"JWKS without audience": {[]string{"--jwt-jwks", "https://issuer.example=http://127.0.0.1:1/jwks"}, nil, "--jwt-audience"},
		"JWKS old flag, no iss": {[]string{"--jwt-jwks-url", "http://127.0.0.1:1/jwks", "--jwt-audience", "lockgate"}, nil, "--jwt-jwks ISSUER=URL"},
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
		})
	}
}
