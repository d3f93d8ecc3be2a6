package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/jwkstest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// TestIdentityIsIssuerAndSubject: the same sub under two issuers is two
// callers: one's Idempotency-Key never returns the other's grant, they
// have a rate bucket each, and a lock's subject names the issuer too.
func TestIdentityIsIssuerAndSubject(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--redis-url", redistest.Start(t).URL(),
		"--subject-rate", "0.01", "--subject-burst", "2")
	a := bearer(token(t, jwt.MapClaims{"iss": "https://a.example", "sub": "deployer"}))
	b := bearer(token(t, jwt.MapClaims{"iss": "https://b.example", "sub": "deployer"}))
	url := gw.URL + "/locks/tenants/shared-name"
	const key, body = "0f8e3c1d-same-key-both-issuers", `{"ttl_ms":60000}`

	var ga grant
	wantJSON(t, call(t, "POST", url, body, with(a, []string{"Idempotency-Key", key})...), http.StatusCreated, &ga)
	// B sends A's key: a call of its own, refused since A holds the lock,
	// never A's grant.
	r := call(t, "POST", url, body, with(b, []string{"Idempotency-Key", key})...)
	if r.status == http.StatusCreated {
		t.Errorf("issuer B's sub with issuer A's Idempotency-Key got a grant: %s", r.body)
	} else {
		wantProblem(t, r, http.StatusConflict, "lock_held")
	}

	// Each has a bucket of 2: A spends its second call, and is refused a
	// third; B still has its second.
	var info struct{ Subject string }
	wantJSON(t, call(t, "GET", url, "", a...), http.StatusOK, &info)
	if info.Subject != "https://a.example#deployer" {
		t.Errorf("the holder's subject: got %q, want https://a.example#deployer", info.Subject)
	}
	wantRateLimited(t, call(t, "GET", url, "", a...), 2, 200)
	if r := call(t, "GET", url, "", b...); r.status != http.StatusOK {
		t.Fatalf("issuer B's second call after issuer A's sub spent its bucket: got %d %s, want 200", r.status, r.body)
	}

	// A token without iss keeps its plain sub.
	plain := startGateway(t)
	g := acquire(t, plain.URL+"/locks/tenants/plain", "")
	wantJSON(t, call(t, "GET", plain.URL+"/locks/tenants/plain", "", bearer(token(t, nil))...), http.StatusOK, &info)
	if info.Subject != "tester" || g.Token == "" {
		t.Fatalf("subject of a token without iss: got %q, want tester", info.Subject)
	}
}

// TestJWKSKeysBelongToTheirIssuer: with two providers' JWK Sets and a
// policy that grants namespaces by iss, a token signed with provider A's
// key that claims B's issuer gets 401, never B's namespaces. The old
// flag, which cannot say whose set is whose, either refuses to start with
// two sets or keeps them apart all the same.
func TestJWKSKeysBelongToTheirIssuer(t *testing.T) {
	t.Parallel()
	ka, kb := jwkstest.RSA(t, "a1"), jwkstest.RSA(t, "b1")
	idpA, idpB := jwkstest.Start(t), jwkstest.Start(t)
	idpA.Set(ka.JWK(t))
	idpB.Set(kb.JWK(t))
	policy := writePolicy(t, `{"rules": [
		{"match": {"iss": "https://a.example"}, "namespaces": ["team-a"]},
		{"match": {"iss": "https://b.example"}, "namespaces": ["team-b"]}
	]}`)
	claims := func(iss string, extra jwt.MapClaims) jwt.MapClaims {
		c := oidcClaims(jwt.MapClaims{"iss": iss, "sub": "deployer"})
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	noKID := ka
	noKID.KID = ""
	forged := map[string]string{
		"A's key claiming B":        ka.Sign(t, claims("https://b.example", nil)),
		"A's key no kid claiming B": noKID.Sign(t, claims("https://b.example", nil)),
	}
	check := func(t *testing.T, gw string) {
		t.Helper()
		if r := call(t, "POST", gw+"/locks/team-a/x", "", bearer(ka.Sign(t, claims("https://a.example", nil)))...); r.status != http.StatusCreated {
			t.Fatalf("A's own token on team-a: got %d %s, want 201", r.status, r.body)
		}
		for name, tok := range forged {
			r := call(t, "POST", gw+"/locks/team-b/"+strings.NewReplacer(" ", "-", "'", "", ",", "").Replace(name), "", bearer(tok)...)
			if r.status == http.StatusCreated {
				t.Errorf("%s: got 201 on B's namespace, want 401", name)
				continue
			}
			wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		}
	}

	t.Run("old flag", func(t *testing.T) {
		var logs gatewaytest.Buffer
		args := []string{"gateway", "--addr", "127.0.0.1:0", "--policy", policy, "--jwt-audience", "lockgate",
			"--jwt-jwks-url", idpA.URL + " " + idpB.URL}
		gw, err := app.Start(t.Context(), args, func(string) string { return "" }, &logs)
		if err != nil {
			if !strings.Contains(err.Error(), "--jwt-jwks ") {
				t.Fatalf("refused to start with %v; want the error to name --jwt-jwks", err)
			}
			return
		}
		defer gw.Stop()
		check(t, gw.URL)
	})
	t.Run("a set per issuer", func(t *testing.T) {
		gw := startGatewayEnv(t, nil, "--policy", policy, "--jwt-audience", "lockgate",
			"--jwt-jwks", "https://a.example="+idpA.URL, "--jwt-jwks", "https://b.example="+idpB.URL)
		check(t, gw.URL)
		if r := call(t, "POST", gw.URL+"/locks/team-b/x", "", bearer(kb.Sign(t, claims("https://b.example", nil)))...); r.status != http.StatusCreated {
			t.Fatalf("B's own token on team-b: got %d %s, want 201", r.status, r.body)
		}
	})
}

// TestJWKSStaleSet: a JWK Set that cannot be refreshed for longer than
// --jwt-jwks-max-stale shows in /readyz (503) and in the metrics, until a
// fetch succeeds again; its keys stay in use meanwhile.
func TestJWKSStaleSet(t *testing.T) {
	t.Parallel()
	k := jwkstest.ES256(t, "k")
	idp := jwkstest.Start(t)
	idp.Set(k.JWK(t))
	gw := startGatewayEnv(t, nil, "--jwt-jwks", "https://issuer.example="+idp.URL, "--jwt-audience", "lockgate",
		"--jwt-jwks-refresh", "100ms", "--jwt-jwks-max-stale", "500ms")
	metric := func(name string) string {
		r := call(t, "GET", gw.URL+"/metrics", "")
		for line := range strings.Lines(string(r.body)) {
			if strings.HasPrefix(line, name+`{issuer="https://issuer.example",url="`+idp.URL+`"} `) {
				return strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
			}
		}
		return ""
	}
	if r := call(t, "GET", gw.URL+"/readyz", ""); r.status != http.StatusOK || metric("lockgate_jwks_keys") != "1" || metric("lockgate_jwks_stale") != "0" {
		t.Fatalf("/readyz %d, keys %q, stale %q: want 200, 1, 0", r.status, metric("lockgate_jwks_keys"), metric("lockgate_jwks_stale"))
	}
	idp.Fail(http.StatusBadGateway)
	pollUntil(t, "/readyz answers 503", func() bool { return call(t, "GET", gw.URL+"/readyz", "").status == http.StatusServiceUnavailable })
	p := wantProblem(t, call(t, "GET", gw.URL+"/readyz", ""), http.StatusServiceUnavailable, "backend_unavailable")
	if !strings.Contains(p.Detail, "JWK Set") || strings.Contains(p.Detail, idp.URL) || metric("lockgate_jwks_stale") != "1" {
		t.Fatalf("detail %q, stale %q: want a detail naming the JWK Set, not its URL, and stale 1", p.Detail, metric("lockgate_jwks_stale"))
	}
	tok := k.Sign(t, oidcClaims(jwt.MapClaims{"ns": []string{"*"}}))
	if r := call(t, "POST", gw.URL+"/locks/stale/x", "", bearer(tok)...); r.status != http.StatusCreated {
		t.Fatalf("a token of the stale set: got %d %s, want 201", r.status, r.body)
	}
	idp.Fail(0)
	pollUntil(t, "/readyz answers 200", func() bool { return call(t, "GET", gw.URL+"/readyz", "").status == http.StatusOK })
}
