package handlers

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestSignedGrants: with a signer, every answer that tells of a lease
// (acquire, renew, re-entry, a permit and its renewal) carries a JWS that
// verifies against the served JWK Set and says what the answer says; the
// owner token is not in it.
func TestSignedGrants(t *testing.T) {
	k, _ := grantsig.Generate()
	signer, _ := grantsig.NewSigner("test-gateway", []grantsig.Key{k})
	_, h := newTestHandler(t, Config{Backend: embedded.New(embedded.Options{}), Signer: signer})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	resp, err := http.Get(ts.URL + "/.well-known/lockgate/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	set, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("jwks: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), set)
	}
	var jwks struct{ Keys []struct{ Kid, X string } }
	if json.Unmarshal(set, &jwks) != nil || len(jwks.Keys) != 1 || jwks.Keys[0].Kid != k.ID {
		t.Fatalf("jwks: %s", set)
	}
	pub, _ := base64.RawURLEncoding.DecodeString(jwks.Keys[0].X)
	verify := func(what string, body map[string]any) jwt.MapClaims {
		t.Helper()
		jws, _ := body["signed_grant"].(string)
		claims := jwt.MapClaims{}
		if _, err := jwt.ParseWithClaims(jws, claims, func(*jwt.Token) (any, error) { return ed25519.PublicKey(pub), nil },
			jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
			t.Fatalf("%s: signed_grant %q: %v", what, jws, err)
		}
		if claims["fencing_token"] != body["fencing_token"] || claims["iss"] != "test-gateway" || claims["sub"] != "alice" {
			t.Fatalf("%s: claims %v of %v", what, claims, body)
		}
		exp, _ := claims["exp"].(float64)
		at, _ := time.Parse(time.RFC3339Nano, body["expires_at"].(string))
		if d := time.UnixMilli(int64(exp*1000 + 0.5)).Sub(at); d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("%s: exp %v, expires_at %v", what, exp, at)
		}
		if tok, _ := body["token"].(string); tok != "" && strings.Contains(string(mustDecodePayload(t, jws)), tok) {
			t.Fatalf("%s: the owner token is in the signed grant", what)
		}
		return claims
	}
	alice := signed(t, "alice")
	st, g := call(t, ts.URL, "POST", "/locks/team/job", alice, `{"ttl_ms":60000,"signed":true}`)
	if st != http.StatusCreated {
		t.Fatalf("acquire: %d %v", st, g)
	}
	if c := verify("acquire", g); c["lock"] != "team/job" || c["mode"] != "exclusive" {
		t.Fatalf("acquire: claims %v", c)
	}
	token := g["token"].(string)
	st, r := call(t, ts.URL, "PUT", "/locks/team/job/lease", alice, `{"ttl_ms":120000}`, "Lock-Token", token)
	if st != http.StatusOK {
		t.Fatalf("renew: %d %v", st, r)
	}
	verify("renew", r)
	st, re := call(t, ts.URL, "POST", "/locks/team/job", alice, `{"ttl_ms":60000}`, "Lock-Token", token)
	if st != http.StatusOK {
		t.Fatalf("re-enter: %d %v", st, re)
	}
	verify("re-entry", re)

	st, sh := call(t, ts.URL, "POST", "/locks/team/read", alice, `{"ttl_ms":60000,"mode":"shared"}`)
	if st != http.StatusCreated {
		t.Fatalf("shared acquire: %d %v", st, sh)
	}
	verify("shared acquire", sh)
	st, shr := call(t, ts.URL, "PUT", "/locks/team/read/lease", alice, "", "Lock-Token", sh["token"].(string))
	if c := verify("shared renew", shr); st != http.StatusOK || c["mode"] != "shared" {
		t.Fatalf("shared renew: %d %v, claims %v", st, shr, c)
	}

	st, p := call(t, ts.URL, "POST", "/semaphores/team/pool", alice, `{"limit":2,"ttl_ms":60000,"signed":true}`)
	if st != http.StatusCreated {
		t.Fatalf("permit: %d %v", st, p)
	}
	if c := verify("permit", p); c["semaphore"] != "team/pool" || c["mode"] != "permit" || c["lock"] != nil {
		t.Fatalf("permit: claims %v", c)
	}
	st, pr := call(t, ts.URL, "PUT", "/semaphores/team/pool/lease", alice, "", "Lock-Token", p["token"].(string))
	if st != http.StatusOK {
		t.Fatalf("permit renew: %d %v", st, pr)
	}
	verify("permit renew", pr)
}

func mustDecodePayload(t *testing.T, jws string) []byte {
	t.Helper()
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", jws)
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSigningOff: without a signer, grants carry no signed_grant, an
// acquire that insists on one gets a 400 that says why, and the key set
// is a 404 problem.
func TestSigningOff(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{}))
	alice := signed(t, "alice")
	st, g := call(t, ts.URL, "POST", "/locks/team/job", alice, `{"ttl_ms":60000}`)
	if st != http.StatusCreated || g["signed_grant"] != nil {
		t.Fatalf("acquire: %d %v, want 201 without signed_grant", st, g)
	}
	for _, path := range []string{"/locks/team/other", "/semaphores/team/pool"} {
		st, p := call(t, ts.URL, "POST", path, alice, `{"limit":1,"ttl_ms":60000,"signed":true}`)
		if path == "/locks/team/other" {
			st, p = call(t, ts.URL, "POST", path, alice, `{"ttl_ms":60000,"signed":true}`)
		}
		if st != http.StatusBadRequest || p["code"] != "invalid_request" || !strings.Contains(p["detail"].(string), "--grant-keys off") {
			t.Fatalf("%s with signed: true: %d %v, want 400 naming --grant-keys off", path, st, p)
		}
	}
	if st, p := call(t, ts.URL, "POST", "/locks/team/other", alice, `{"signed":"yes"}`); st != http.StatusBadRequest ||
		!strings.Contains(p["detail"].(string), "true or false") {
		t.Fatalf("signed: \"yes\": %d %v, want 400", st, p)
	}
	resp, err := http.Get(ts.URL + "/.well-known/lockgate/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(b), "does not sign") {
		t.Fatalf("jwks with signing off: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
