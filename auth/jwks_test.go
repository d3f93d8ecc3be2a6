package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/jwkstest"
)

// testIssuer is the issuer of the sets of these tests, unless they say
// otherwise; testAudience the audience of their gateway.
const (
	testIssuer   = "https://idp.example"
	testAudience = "lockgate"
)

// setsOf are JWK Sets at urls, all of testIssuer.
func setsOf(urls ...string) []JWKSet {
	sets := make([]JWKSet, len(urls))
	for i, u := range urls {
		sets[i] = JWKSet{Issuer: testIssuer, URL: u}
	}
	return sets
}

// jwksAuth returns an Authenticator on the JWKS cfg says, for
// testAudience.
func jwksAuth(t *testing.T, cfg JWKSConfig) *Authenticator {
	t.Helper()
	j, err := NewJWKS(t.Context(), cfg)
	if err != nil {
		t.Fatalf("NewJWKS: %v", err)
	}
	a, err := NewAuthenticator(Config{JWKS: j, Audience: testAudience})
	if err != nil {
		t.Fatalf("NewAuthenticator: %v", err)
	}
	return a
}

func authenticate(a *Authenticator, token string) (Claims, error) {
	r := httptest.NewRequest("GET", "/locks/a/b", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return a.Authenticate(r)
}

func jwksClaims() jwt.MapClaims {
	return jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "svc", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
}

// pollUntil calls ok until it returns true, failing the test after a
// generous deadline.
func pollUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJWKSVerifies: RS256, ES256 and EdDSA keys of a set verify tokens by
// kid, or without one; nothing else verifies, whatever the set holds.
func TestJWKSVerifies(t *testing.T) {
	rsaS, ecS, edS := jwkstest.RSA(t, "r1"), jwkstest.ES256(t, "e1"), jwkstest.Ed25519(t, "d1")
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallS := jwkstest.Signer{KID: "small", Method: jwt.SigningMethodRS256, Key: small}
	octSecret := []byte("a-symmetric-key-in-a-public-set!")
	oct := json.RawMessage(`{"kty":"oct","kid":"o1","use":"sig","k":"` + base64.RawURLEncoding.EncodeToString(octSecret) + `"}`)
	// A JWK that says RS256 is still not allowed to verify PS256.
	rsaAlg := json.RawMessage(strings.Replace(string(rsaS.JWK(t)), `{`, `{"alg":"RS256",`, 1))
	srv := jwkstest.Start(t)
	srv.Set(rsaAlg, ecS.JWK(t), edS.JWK(t), smallS.JWK(t), oct)
	a := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: time.Hour})
	if err := a.Check(); err != nil {
		t.Fatalf("Check after a good fetch: %v", err)
	}

	der, _ := x509.MarshalPKIXPublicKey(rsaS.Key.Public())
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := func(kid string, key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwksClaims())
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ps := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodPS256, jwksClaims())
		tok.Header["kid"] = "r1"
		s, err := tok.SignedString(rsaS.Key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noKID := rsaS
	noKID.KID = ""
	wrongKID := ecS
	wrongKID.KID = "r1" // an ES256 token naming the RSA key
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwksClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"RS256":                     {rsaS.Sign(t, jwksClaims()), true},
		"ES256":                     {ecS.Sign(t, jwksClaims()), true},
		"EdDSA":                     {edS.Sign(t, jwksClaims()), true},
		"RS256 without kid":         {noKID.Sign(t, jwksClaims()), true},
		"ES256 naming the RSA kid":  {wrongKID.Sign(t, jwksClaims()), false},
		"HS256 keyed with RSA PEM":  {hs("r1", rsaPEM), false},
		"HS256 keyed with RSA n":    {hs("r1", rsaS.Key.Public().(*rsa.PublicKey).N.Bytes()), false},
		"HS256 with the set's oct":  {hs("o1", octSecret), false},
		"PS256 with a RS256 JWK":    {ps(), false},
		"RS256 with a 1024-bit key": {smallS.Sign(t, jwksClaims()), false},
		"alg none":                  {none, false},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := authenticate(a, tc.token)
			if tc.ok {
				if err != nil || c.Subject != "svc" {
					t.Fatalf("got %+v, %v; want subject svc", c, err)
				}
				return
			}
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("got %+v, %v; want ErrUnauthenticated", c, err)
			}
		})
	}
}

// TestJWKSRotation: a key added to the set verifies once the set is
// fetched again for its unknown kid; a key removed stops verifying, even
// for a token verified (and cached) before, after the next refresh.
func TestJWKSRotation(t *testing.T) {
	old, next := jwkstest.RSA(t, "old"), jwkstest.ES256(t, "next")
	srv := jwkstest.Start(t)
	srv.Set(old.JWK(t))
	a := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), Refresh: 50 * time.Millisecond, MinRefetch: 20 * time.Millisecond})
	oldTok, nextTok := old.Sign(t, jwksClaims()), next.Sign(t, jwksClaims())
	if _, err := authenticate(a, oldTok); err != nil {
		t.Fatalf("old key: %v", err)
	}
	if _, err := authenticate(a, nextTok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("next key before it is published: got %v, want ErrUnauthenticated", err)
	}
	srv.Set(old.JWK(t), next.JWK(t))
	pollUntil(t, "the new kid verifies", func() bool { _, err := authenticate(a, nextTok); return err == nil })
	srv.Set(next.JWK(t))
	pollUntil(t, "the removed kid is refused", func() bool { _, err := authenticate(a, oldTok); return err != nil })
	if _, err := authenticate(a, nextTok); err != nil {
		t.Fatalf("next key after the rotation: %v", err)
	}
}

// TestJWKSUnknownKIDRefetchLimited: tokens with kids no set holds fetch the
// set again at most once per MinRefetch, and do not wait for it.
func TestJWKSUnknownKIDRefetchLimited(t *testing.T) {
	known := jwkstest.RSA(t, "known")
	srv := jwkstest.Start(t)
	srv.Set(known.JWK(t))
	a := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: time.Hour})
	if got := srv.Fetches(); got != 1 {
		t.Fatalf("fetches after start: got %d, want 1", got)
	}
	other := jwkstest.RSA(t, "")
	for i := range 50 {
		s := other // a key no set holds
		if i%2 == 0 {
			s = known // a known key under a kid no set holds
		}
		s.KID = fmt.Sprintf("unknown-%d", i)
		if _, err := authenticate(a, s.Sign(t, jwksClaims())); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("unknown kid: got %v, want ErrUnauthenticated", err)
		}
	}
	if got := srv.Fetches(); got != 2 {
		t.Fatalf("fetches after 50 unknown kids: got %d, want 2 (one refetch per MinRefetch)", got)
	}
}

// TestJWKSNotReadyUntilFetched: a set that cannot be fetched at start is
// no error; Check says so until a retry loads it.
func TestJWKSNotReadyUntilFetched(t *testing.T) {
	s := jwkstest.RSA(t, "k")
	srv := jwkstest.Start(t)
	srv.Set(s.JWK(t))
	srv.Fail(http.StatusServiceUnavailable)
	reported := make(chan string, 100)
	a := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: 20 * time.Millisecond,
		OnError: func(set JWKSet, err error) {
			select {
			case reported <- set.URL:
			default:
			}
		}})
	err := a.Check()
	if err == nil || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "not fetched") {
		t.Fatalf("Check while the set is down: got %v, want an error naming %s", err, srv.URL)
	}
	select {
	case u := <-reported:
		if u != srv.URL {
			t.Fatalf("OnError: got %q, want %s", u, srv.URL)
		}
	default:
		t.Fatal("OnError heard of no failed fetch")
	}
	if _, err := authenticate(a, s.Sign(t, jwksClaims())); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("token while the set is down: got %v, want ErrUnauthenticated", err)
	}
	srv.Fail(0)
	pollUntil(t, "Check passes once the set loads", func() bool { return a.Check() == nil })
	if _, err := authenticate(a, s.Sign(t, jwksClaims())); err != nil {
		t.Fatalf("token once the set loaded: %v", err)
	}
}

// TestJWKSRefusesTooLarge: a set past 1 MiB is not loaded.
func TestJWKSRefusesTooLarge(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[{"kty":"oct","k":"` + strings.Repeat("A", maxJWKSBytes) + `"}]}`))
	}))
	defer ts.Close()
	a := jwksAuth(t, JWKSConfig{Sets: setsOf(ts.URL), MinRefetch: time.Hour})
	if a.Check() == nil {
		t.Fatal("Check: got ready on a set past the size limit")
	}
}

func TestNewJWKSRefuses(t *testing.T) {
	for name, sets := range map[string][]JWKSet{
		"none":                  nil,
		"empty":                 setsOf(""),
		"ftp":                   setsOf("ftp://example.com/jwks"),
		"relative":              setsOf("/jwks"),
		"twice":                 setsOf("http://127.0.0.1:1/jwks", "http://127.0.0.1:1/jwks"),
		"twice, two issuers":    {{Issuer: "a", URL: "http://127.0.0.1:1/jwks"}, {Issuer: "b", URL: "http://127.0.0.1:1/jwks"}},
		"no issuer":             {{URL: "http://127.0.0.1:1/jwks"}},
		"an issuer holding '#'": {{Issuer: "https://a.example#x", URL: "http://127.0.0.1:1/jwks"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewJWKS(t.Context(), JWKSConfig{Sets: sets, Timeout: time.Second}); err == nil {
				t.Fatal("got no error")
			}
		})
	}
}

// TestJWKSWithSecret: with an HS256 secret and a JWKS, HS256 tokens verify
// with the secret only, never with a symmetric key the set publishes.
func TestJWKSWithSecret(t *testing.T) {
	octSecret := []byte("a-symmetric-key-in-a-public-set!")
	srv := jwkstest.Start(t)
	rsaS := jwkstest.RSA(t, "r1")
	srv.Set(rsaS.JWK(t), json.RawMessage(`{"kty":"oct","kid":"o1","k":"`+base64.RawURLEncoding.EncodeToString(octSecret)+`"}`))
	j, err := NewJWKS(t.Context(), JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret), JWKS: j, Audience: testAudience, Issuers: []string{testIssuer}})
	if err != nil {
		t.Fatal(err)
	}
	hs := func(key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwksClaims())
		tok.Header["kid"] = "o1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := authenticate(a, hs([]byte(testSecret))); err != nil {
		t.Fatalf("HS256 with the secret: %v", err)
	}
	if _, err := authenticate(a, rsaS.Sign(t, jwksClaims())); err != nil {
		t.Fatalf("RS256 from the set: %v", err)
	}
	if _, err := authenticate(a, hs(octSecret)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("HS256 with the set's oct key: got %v, want ErrUnauthenticated", err)
	}
}
