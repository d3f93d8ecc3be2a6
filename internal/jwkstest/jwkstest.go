// Package jwkstest serves JSON Web Key Sets to tests, from a real loopback
// listener, and signs tokens with the keys it serves: an identity provider
// in miniature, whose set a test can rotate, break and count fetches of.
package jwkstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// Server serves one JWK Set at URL until the test ends.
type Server struct {
	URL string

	mu      sync.Mutex
	keys    []json.RawMessage
	status  int           // 0: 200 with the set
	hold    chan struct{} // while not nil, fetches wait for it to close
	fetches atomic.Int64
	held    atomic.Int64 // fetches waiting on hold now
}

// Start serves an empty set.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			s.held.Add(1)
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			s.held.Add(-1)
		}
		s.mu.Lock()
		status, keys := s.status, s.keys
		s.mu.Unlock()
		if status != 0 {
			http.Error(w, "unavailable", status)
			return
		}
		if keys == nil {
			keys = []json.RawMessage{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Set replaces the set with these JWKs.
func (s *Server) Set(keys ...json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

// Fail makes every fetch answer status, or the set again for 0.
func (s *Server) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Hold makes fetches wait, from now until release is called (or the
// client gives up); they then answer with the set as it is at that time.
func (s *Server) Hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Held counts the fetches waiting on Hold now.
func (s *Server) Held() int64 { return s.held.Load() }

// Fetches counts the requests served so far.
func (s *Server) Fetches() int64 { return s.fetches.Load() }

// Signer is a private key with its kid.
type Signer struct {
	KID    string
	Method jwt.SigningMethod
	Key    crypto.Signer
}

// RSA returns a 2048-bit RS256 signer.
func RSA(t testing.TB, kid string) Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return Signer{KID: kid, Method: jwt.SigningMethodRS256, Key: k}
}

// ES256 returns a P-256 signer.
func ES256(t testing.TB, kid string) Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Signer{KID: kid, Method: jwt.SigningMethodES256, Key: k}
}

// Ed25519 returns an EdDSA signer.
func Ed25519(t testing.TB, kid string) Signer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Signer{KID: kid, Method: jwt.SigningMethodEdDSA, Key: k}
}

// JWK is the public key as a JWK with kid and "use": "sig" (and no alg,
// as many providers publish them).
func (s Signer) JWK(t testing.TB) json.RawMessage {
	t.Helper()
	return PublicJWK(t, s.KID, s.Key.Public())
}

// PublicJWK is pub as a JWK with kid and "use": "sig".
func PublicJWK(t testing.TB, kid string, pub crypto.PublicKey) json.RawMessage {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig},
	})
	if err != nil {
		t.Fatalf("JWK of %T: %v", pub, err)
	}
	m := jwk.Marshal()
	m.ALG = "" // NewJWKFromKey fills it in for some key types
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign signs claims with the key, kid in the header ("" leaves it out).
func (s Signer) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.Method, claims)
	if s.KID != "" {
		tok.Header["kid"] = s.KID
	}
	str, err := tok.SignedString(s.Key)
	if err != nil {
		t.Fatalf("sign %s: %v", s.Method.Alg(), err)
	}
	return str
}
