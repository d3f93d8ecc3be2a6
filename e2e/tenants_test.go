package e2e

import (
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestIdentityIsIssuerAndSubject: the same sub under two issuers is two
// callers: one's Idempotency-Key never returns the other's grant, they
// have a rate bucket each, and a lock's subject names the issuer too.
func TestIdentityIsIssuerAndSubject(t *testing.T) {
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
