package handlers

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// leaseAnswers makes every call whose answer tells of a lease, each with
// extra (such as `,"signed":true`) at the end of its JSON body, on names
// under prefix, and returns the answers by call; a lock set's answer
// stands for each of its locks. The owner tokens are the answers' too.
func leaseAnswers(t *testing.T, url, bearer, prefix, extra string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	do := func(name string, want int, method, path, body string, headers ...string) map[string]any {
		t.Helper()
		st, r := call(t, url, method, path, bearer, body, headers...)
		if st != want {
			t.Fatalf("%s: got %d %v, want %d", name, st, r, want)
		}
		out[name] = r
		return r
	}
	lock := "/locks/" + prefix + "/job"
	g := do("acquire", http.StatusCreated, "POST", lock, `{"ttl_ms":60000`+extra+`}`)
	token := g["token"].(string)
	do("renew", http.StatusOK, "PUT", lock+"/lease", `{"ttl_ms":120000`+extra+`}`, "Lock-Token", token)
	do("re-entry", http.StatusOK, "POST", lock, `{"ttl_ms":60000`+extra+`}`, "Lock-Token", token)
	sh := do("shared acquire", http.StatusCreated, "POST", "/locks/"+prefix+"/read", `{"ttl_ms":60000,"mode":"shared"`+extra+`}`)
	do("shared renew", http.StatusOK, "PUT", "/locks/"+prefix+"/read/lease", `{"ttl_ms":60000`+extra+`}`, "Lock-Token", sh["token"].(string))
	p := do("permit", http.StatusCreated, "POST", "/semaphores/"+prefix+"/pool", `{"limit":2,"ttl_ms":60000`+extra+`}`)
	do("permit renew", http.StatusOK, "PUT", "/semaphores/"+prefix+"/pool/lease", `{"ttl_ms":60000`+extra+`}`, "Lock-Token", p["token"].(string))
	set := prefix + "/a," + prefix + "/b"
	ls := do("lock set", http.StatusCreated, "POST", "/lock-sets", `{"locks":"`+set+`","ttl_ms":60000`+extra+`}`)
	do("lock set renew", http.StatusOK, "PUT", "/lock-sets/lease?locks="+set, `{"ttl_ms":60000`+extra+`}`, "Lock-Token", ls["token"].(string))
	return out
}

// leases are the leases an answer of leaseAnswers tells of: itself, or
// each lock of a set.
func leases(answer map[string]any) []map[string]any {
	ls, ok := answer["locks"].([]any)
	if !ok {
		return []map[string]any{answer}
	}
	out := make([]map[string]any, len(ls))
	for i, l := range ls {
		out[i] = l.(map[string]any)
	}
	return out
}

// TestSignedGrants: with a signer, every answer that tells of a lease
// (acquire, renew, re-entry, a shared hold and its renewal, a permit and
// its renewal, a lock set and its renewal) whose call asks for it
// carries a JWS that verifies against the served JWK Set and says what
// the answer says; the owner token is not in it.
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
	verify := func(what string, body map[string]any, token string) jwt.MapClaims {
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
		if token != "" && strings.Contains(string(mustDecodePayload(t, jws)), token) {
			t.Fatalf("%s: the owner token is in the signed grant", what)
		}
		return claims
	}
	answers := leaseAnswers(t, ts.URL, signed(t, "alice"), "team", `,"signed":true`)
	for _, tc := range []struct{ call, lock, semaphore, mode, tokenOf string }{
		{"acquire", "team/job", "", "exclusive", "acquire"},
		{"renew", "team/job", "", "exclusive", "acquire"},
		{"re-entry", "team/job", "", "exclusive", "acquire"},
		{"shared acquire", "team/read", "", "shared", "shared acquire"},
		{"shared renew", "team/read", "", "shared", "shared acquire"},
		{"permit", "", "team/pool", "permit", "permit"},
		{"permit renew", "", "team/pool", "permit", "permit"},
		{"lock set", "team/a", "", "exclusive", "lock set"},
		{"lock set renew", "team/a", "", "exclusive", "lock set"},
	} {
		token, _ := answers[tc.tokenOf]["token"].(string)
		ls := leases(answers[tc.call])
		for i, l := range ls {
			c := verify(tc.call, l, token)
			if i == 0 && (c["lock"] != nilIfEmpty(tc.lock) || c["semaphore"] != nilIfEmpty(tc.semaphore) || c["mode"] != tc.mode) {
				t.Fatalf("%s: claims %v, want lock %q, semaphore %q, mode %s", tc.call, c, tc.lock, tc.semaphore, tc.mode)
			}
			if c["lock"] != l["lock"] && tc.semaphore == "" {
				t.Fatalf("%s: claims %v of %v", tc.call, c, l)
			}
		}
	}
	if got := signer.Signed(); got != 11 {
		t.Fatalf("the signer signed %d grants, want 11 (7 answers, and 2 of each lock set's)", got)
	}
}

// nilIfEmpty is s as a claim: absent (nil) when empty.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestGrantsSignedWhenAsked: a grant is signed when its call asks, or by
// the operator's SignAll when the call says nothing; "signed": false is
// never signed. A call that does not get a signed grant costs no
// signature: the signer is not called.
func TestGrantsSignedWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signAll bool
		extra   string
		want    bool
	}{
		{"on-request, not asked", false, ``, false},
		{"on-request, refused", false, `,"signed":false`, false},
		{"on-request, asked", false, `,"signed":true`, true},
		{"always, not asked", true, ``, true},
		{"always, refused", true, `,"signed":false`, false},
		{"always, asked", true, `,"signed":true`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := grantsig.Generate()
			signer, _ := grantsig.NewSigner("test-gateway", []grantsig.Key{k})
			_, h := newTestHandler(t, Config{Backend: embedded.New(embedded.Options{}), Signer: signer, SignAll: tc.signAll})
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			n := 0
			for call, answer := range leaseAnswers(t, ts.URL, signed(t, "alice"), "team", tc.extra) {
				for _, l := range leases(answer) {
					n++
					if _, got := l["signed_grant"]; got != tc.want {
						t.Errorf("%s: signed_grant in the answer: got %v, want %v (%v)", call, got, tc.want, l)
					}
				}
			}
			want := uint64(0)
			if tc.want {
				want = uint64(n)
			}
			if got := signer.Signed(); got != want {
				t.Errorf("the signer signed %d grants, want %d", got, want)
			}
		})
	}
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

// TestSigningOff: without a signer, grants carry no signed_grant, a call
// that asks for one (an acquire, a renewal) gets a 400 that says why and
// changes nothing, and the key set is a 404 problem.
func TestSigningOff(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := newTestServer(t, mem)
	alice := signed(t, "alice")
	answers := leaseAnswers(t, ts.URL, alice, "team", `,"signed":false`)
	for call, a := range answers {
		for _, l := range leases(a) {
			if _, ok := l["signed_grant"]; ok {
				t.Fatalf("%s: %v, want no signed_grant", call, l)
			}
		}
	}
	token := answers["acquire"]["token"].(string)
	before, err := mem.Inspect(t.Context(), locks.Key{Namespace: "team", Name: "job"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, body, lockToken string }{
		{"POST", "/locks/team/other", `{"ttl_ms":60000,"signed":true}`, ""},
		{"POST", "/semaphores/team/other", `{"limit":1,"ttl_ms":60000,"signed":true}`, ""},
		{"POST", "/lock-sets", `{"locks":"team/other,team/else","ttl_ms":60000,"signed":true}`, ""},
		{"PUT", "/locks/team/job/lease", `{"ttl_ms":600000,"signed":true}`, token},
		{"POST", "/locks/team/job", `{"ttl_ms":600000,"signed":true}`, token},
	} {
		var headers []string
		if tc.lockToken != "" {
			headers = []string{"Lock-Token", tc.lockToken}
		}
		st, p := call(t, ts.URL, tc.method, tc.path, alice, tc.body, headers...)
		if st != http.StatusBadRequest || p["code"] != "invalid_request" || !strings.Contains(p["detail"].(string), "--grant-keys off") {
			t.Fatalf("%s %s %s: %d %v, want 400 naming --grant-keys off", tc.method, tc.path, tc.body, st, p)
		}
	}
	for _, name := range []string{"other", "else"} {
		if _, err := mem.Inspect(t.Context(), locks.Key{Namespace: "team", Name: name}); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("team/%s after refused acquires: %v, want not held", name, err)
		}
	}
	if after, err := mem.Inspect(t.Context(), locks.Key{Namespace: "team", Name: "job"}); err != nil ||
		!after.ExpiresAt.Equal(before.ExpiresAt) || after.Holds != before.Holds {
		t.Fatalf("team/job after a refused renewal and re-entry: %+v, %v; want it as before, %+v", after, err, before)
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
