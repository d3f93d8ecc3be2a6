package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/jwkstest"
)

// TestJWKSKeyOfAnotherIssuer: a token verifies only with the keys of its
// own issuer's set: one signed with set A's key that claims B's issuer
// is refused, kid or no kid.
func TestJWKSKeyOfAnotherIssuer(t *testing.T) {
	ka, kb := jwkstest.RSA(t, "a1"), jwkstest.ES256(t, "b1")
	a, b := jwkstest.Start(t), jwkstest.Start(t)
	a.Set(ka.JWK(t))
	b.Set(kb.JWK(t))
	auth := jwksAuth(t, JWKSConfig{Sets: []JWKSet{{Issuer: "https://a.example", URL: a.URL}, {Issuer: "https://b.example", URL: b.URL}},
		MinRefetch: time.Hour})
	claims := func(iss string) jwt.MapClaims {
		c := jwksClaims()
		c["iss"] = iss
		return c
	}
	noKID := ka
	noKID.KID = ""
	noIss := jwksClaims()
	delete(noIss, "iss")
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"A's key, A's issuer":            {ka.Sign(t, claims("https://a.example")), true},
		"B's key, B's issuer":            {kb.Sign(t, claims("https://b.example")), true},
		"A's key, B's issuer":            {ka.Sign(t, claims("https://b.example")), false},
		"A's key without kid, B's":       {noKID.Sign(t, claims("https://b.example")), false},
		"A's key, an issuer of no set":   {ka.Sign(t, claims("https://c.example")), false},
		"A's key, no issuer":             {ka.Sign(t, noIss), false},
		"B's key naming A's kid, B's":    {jwkstest.Signer{KID: "a1", Method: kb.Method, Key: kb.Key}.Sign(t, claims("https://b.example")), false},
		"A's key without kid, A's":       {noKID.Sign(t, claims("https://a.example")), true},
		"B's key, B's issuer, other kid": {jwkstest.Signer{KID: "b2", Method: kb.Method, Key: kb.Key}.Sign(t, claims("https://b.example")), false},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := authenticate(auth, tc.token)
			if tc.ok != (err == nil) {
				t.Fatalf("got %+v, %v; want accepted %v", c, err, tc.ok)
			}
		})
	}
}

// TestJWKSSameKIDTwice: a kid published twice (in two sets of an issuer,
// or twice in one) verifies with whichever of its keys signed the token,
// every time.
func TestJWKSSameKIDTwice(t *testing.T) {
	k1, k2, k3 := jwkstest.RSA(t, "same"), jwkstest.RSA(t, "same"), jwkstest.ES256(t, "same")
	a, b := jwkstest.Start(t), jwkstest.Start(t)
	a.Set(k1.JWK(t), k3.JWK(t))
	b.Set(k2.JWK(t))
	auth := jwksAuth(t, JWKSConfig{Sets: setsOf(a.URL, b.URL), MinRefetch: time.Hour})
	for i := range 30 {
		for _, k := range []jwkstest.Signer{k1, k2, k3} {
			c := jwksClaims()
			c["jti"] = strconv.Itoa(i) // a token of its own: no cached verification
			if _, err := authenticate(auth, k.Sign(t, c)); err != nil {
				t.Fatalf("token %d of a key under kid %q: %v", i, k.KID, err)
			}
		}
	}
}

// TestJWKSRequestsWaitForTheFetch: requests whose kid arrives with a fetch
// under way wait for that fetch, all of them, not only the one that
// started it.
func TestJWKSRequestsWaitForTheFetch(t *testing.T) {
	old, next := jwkstest.RSA(t, "old"), jwkstest.RSA(t, "next")
	srv := jwkstest.Start(t)
	srv.Set(old.JWK(t))
	// KeyWait far longer than the test holds the fetch, however slow the
	// machine: it is the wait that is tested here, not its bound.
	auth := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: time.Hour, KeyWait: time.Minute})
	srv.Set(old.JWK(t), next.JWK(t))
	release := srv.Hold()
	defer release()
	results := make(chan error, 5)
	for i := range 5 {
		go func() {
			c := jwksClaims()
			c["jti"] = strconv.Itoa(i)
			_, err := authenticate(auth, next.Sign(t, c))
			results <- err
		}()
	}
	pollUntil(t, "a fetch for the new kid", func() bool { return srv.Held() == 1 })
	// While the fetch is held, none may answer: each waits for it.
	select {
	case err := <-results:
		t.Fatalf("a request answered during the fetch: %v; want it to wait for the fetch", err)
	case <-time.After(500 * time.Millisecond):
	}
	release()
	for range 5 {
		if err := <-results; err != nil {
			t.Errorf("a request that waited for the fetch: %v, want the new key", err)
		}
	}
}

// TestJWKSSlowFetchBounded: a token with an unknown kid waits for a slow
// fetch for a bounded time, not for the whole fetch timeout.
func TestJWKSSlowFetchBounded(t *testing.T) {
	k := jwkstest.RSA(t, "k")
	srv := jwkstest.Start(t)
	srv.Set(k.JWK(t))
	auth := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), MinRefetch: time.Hour, Timeout: 10 * time.Second})
	release := srv.Hold()
	defer release()
	c := jwksClaims()
	start := time.Now()
	_, err := authenticate(auth, jwkstest.RSA(t, "unknown").Sign(t, c))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a token with an unknown kid waited %v for a slow fetch, want a few seconds at most", took)
	}
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("got %v, want ErrUnauthenticated", err)
	}
}

// TestJWKSBadKeySkipped: a key that cannot be parsed is skipped; the rest
// of the set loads with it, and a key removed from it stops verifying.
func TestJWKSBadKeySkipped(t *testing.T) {
	old, next := jwkstest.RSA(t, "old"), jwkstest.ES256(t, "next")
	srv := jwkstest.Start(t)
	srv.Set(old.JWK(t))
	auth := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), Refresh: 50 * time.Millisecond, MinRefetch: 20 * time.Millisecond})
	c := jwksClaims()
	oldTok, nextTok := old.Sign(t, c), next.Sign(t, c)
	if _, err := authenticate(auth, oldTok); err != nil {
		t.Fatalf("old key: %v", err)
	}
	bad := json.RawMessage(`{"kty":"RSA","kid":"bad","use":"sig","n":"not base64!","e":"AQAB"}`)
	srv.Set(bad, next.JWK(t))
	pollUntil(t, "the new key verifies beside a bad one", func() bool { _, err := authenticate(auth, nextTok); return err == nil })
	pollUntil(t, "the removed key is refused", func() bool { _, err := authenticate(auth, oldTok); return err != nil })
	if st := auth.JWKSStatus(); len(st) != 1 || st[0].Keys != 1 || st[0].Skipped != 1 {
		t.Fatalf("status: got %+v, want 1 key in use and 1 skipped", st)
	}
}

// TestJWKSStale: a set that cannot be refreshed for longer than MaxStale
// makes Check fail and says so in its status, until a fetch succeeds.
func TestJWKSStale(t *testing.T) {
	k := jwkstest.RSA(t, "k")
	srv := jwkstest.Start(t)
	srv.Set(k.JWK(t))
	auth := jwksAuth(t, JWKSConfig{Sets: setsOf(srv.URL), Refresh: 50 * time.Millisecond, MinRefetch: 20 * time.Millisecond, MaxStale: 300 * time.Millisecond})
	if err := auth.Check(); err != nil {
		t.Fatalf("Check after a good fetch: %v", err)
	}
	srv.Fail(http.StatusServiceUnavailable)
	pollUntil(t, "Check fails on a stale set", func() bool { return auth.Check() != nil })
	var nr *JWKSNotReadyError
	if err := auth.Check(); !errors.As(err, &nr) || len(nr.Stale) != 1 || nr.Stale[0] != srv.URL || strings.Contains(nr.Detail(), srv.URL) {
		t.Fatalf("Check: got %v, want a JWKSNotReadyError naming %s as stale, and a detail that does not", err, srv.URL)
	}
	if st := auth.JWKSStatus()[0]; !st.Stale || st.Failures == 0 || st.Keys != 1 {
		t.Fatalf("status: got %+v, want stale, failures, the key still in use", st)
	}
	if _, err := authenticate(auth, k.Sign(t, jwksClaims())); err != nil {
		t.Fatalf("the stale set's key: %v, want it still in use", err)
	}
	srv.Fail(0)
	pollUntil(t, "Check passes once the set refreshes", func() bool { return auth.Check() == nil })
}

// TestSameOrigin: a fetch follows redirects on its set's scheme and host
// only.
func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://idp.example/jwks", "https://idp.example/keys", true},
		{"https://idp.example/jwks", "https://IDP.example:443/keys", true},
		{"https://idp.example/jwks", "http://idp.example/keys", false},
		{"https://idp.example/jwks", "https://idp.example:8443/keys", false},
		{"https://idp.example/jwks", "https://evil.example/keys", false},
		{"http://127.0.0.1:80/jwks", "http://127.0.0.1/keys", true},
	} {
		from, to := httptest.NewRequest("GET", tc.from, nil), httptest.NewRequest("GET", tc.to, nil)
		if err := sameOrigin(to, []*http.Request{from}); (err == nil) != tc.ok {
			t.Errorf("%s to %s: got %v, want followed %v", tc.from, tc.to, err, tc.ok)
		}
	}
}

// TestJWKSRedirectToAnotherHost: a set's URL that redirects to another
// host is not followed; one that redirects on its own host is.
func TestJWKSRedirectToAnotherHost(t *testing.T) {
	k := jwkstest.RSA(t, "k")
	elsewhere := jwkstest.Start(t)
	elsewhere.Set(k.JWK(t))
	away := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
	var here *httptest.Server
	here = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, away+"/jwks", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, here.URL+"/jwks", http.StatusMovedPermanently)
		case "/jwks":
			w.Write([]byte(`{"keys":[` + string(k.JWK(t)) + `]}`))
		}
	}))
	defer here.Close()
	c := jwksClaims()
	tok := k.Sign(t, c)

	awayAuth := jwksAuth(t, JWKSConfig{Sets: setsOf(here.URL + "/away"), MinRefetch: time.Hour})
	if _, err := authenticate(awayAuth, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a key served after a redirect to another host: got %v, want ErrUnauthenticated", err)
	}
	movedAuth := jwksAuth(t, JWKSConfig{Sets: setsOf(here.URL + "/moved"), MinRefetch: time.Hour})
	if _, err := authenticate(movedAuth, tok); err != nil {
		t.Errorf("a key served after a redirect on the same host: %v", err)
	}
}

// TestCritHeaderRefused: a token whose header lists critical extensions
// is refused (RFC 7515 4.1.11): the gateway understands none.
func TestCritHeaderRefused(t *testing.T) {
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwksClaims())
	tok.Header["crit"] = []string{"exp"}
	s, err := tok.SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	var ae *Error
	if _, err := authenticate(a, s); !errors.As(err, &ae) || !strings.Contains(ae.Reason, "crit") {
		t.Fatalf("token with crit: got %v, want an *Error that names crit", err)
	}
}

// TestIssuerWithHashRefused: an iss holding '#' would make an identity's
// text ambiguous (see Identity.String): such a token is refused, even
// where the gateway's own key takes any iss.
func TestIssuerWithHashRefused(t *testing.T) {
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	for iss, ok := range map[string]bool{"https://a.example": true, "https://a.example#admin": false} {
		c := jwksClaims()
		c["iss"] = iss
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := authenticate(a, s); (err == nil) != ok {
			t.Errorf("iss %q: got %v, want accepted %v", iss, err, ok)
		}
	}
}
