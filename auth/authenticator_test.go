package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testSecret = "middleware-test-secret-32-bytes!!"

func TestNewAuthenticatorRefuses(t *testing.T) {
	rsaSmall, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"nothing":       {},
		"short secret":  {Secret: []byte("short")},
		"both":          {Secret: []byte(testSecret), PublicKeys: []crypto.PublicKey{&p384.PublicKey}},
		"small RSA":     {PublicKeys: []crypto.PublicKey{&rsaSmall.PublicKey}},
		"P-384":         {PublicKeys: []crypto.PublicKey{&p384.PublicKey}},
		"issuer with #": {Secret: []byte(testSecret), Issuers: []string{"https://a.example#x"}},
		"empty issuer":  {Secret: []byte(testSecret), Issuers: []string{""}},
	} {
		if _, err := NewAuthenticator(cfg); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret), Issuers: []string{"iss", "iss2"}, Audience: "aud"})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exp := time.Now().Add(time.Hour).Unix()
	good := sign(jwt.MapClaims{"sub": "s", "ns": []string{"a", "b-*"}, "exp": exp, "iss": "iss", "aud": "aud"})

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+good)
	c, err := a.Authenticate(r)
	if err != nil || c.Identity != (Identity{Issuer: "iss", Subject: "s"}) || len(c.Namespaces) != 2 {
		t.Fatalf("good token: got %+v, %v", c, err)
	}
	r.Header.Set("Authorization", "Bearer "+sign(jwt.MapClaims{"sub": "s", "exp": time.Now().Add(time.Hour).Unix(), "iss": "iss2", "aud": "aud"}))
	if c, err := a.Authenticate(r); err != nil || c.Issuer != "iss2" {
		t.Fatalf("token of the second issuer: got %+v, %v", c, err)
	}

	for name, tc := range map[string]struct {
		header, reason string
	}{
		"missing":     {"", "missing"},
		"expired":     {"Bearer " + sign(jwt.MapClaims{"sub": "s", "exp": time.Now().Add(-time.Hour).Unix(), "iss": "iss", "aud": "aud"}), "expired"},
		"no exp":      {"Bearer " + sign(jwt.MapClaims{"sub": "s", "iss": "iss", "aud": "aud"}), "exp"},
		"wrong iss":   {"Bearer " + sign(jwt.MapClaims{"sub": "s", "exp": exp, "iss": "x", "aud": "aud"}), "issuer"},
		"no iss":      {"Bearer " + sign(jwt.MapClaims{"sub": "s", "exp": exp, "aud": "aud"}), "issuer"},
		"wrong aud":   {"Bearer " + sign(jwt.MapClaims{"sub": "s", "exp": exp, "iss": "iss", "aud": "x"}), "audience"},
		"no sub":      {"Bearer " + sign(jwt.MapClaims{"exp": exp, "iss": "iss", "aud": "aud"}), "sub"},
		"many dots":   {"Bearer " + strings.Repeat(".", 10000), "not a JWT"},
		"long":        {"Bearer a." + strings.Repeat("b", MaxTokenLen) + ".c", "not a JWT"},
		"bad scheme":  {"Token " + good, "Bearer"},
		"bad sig":     {"Bearer " + good[:len(good)-4] + "AAAA", "signature"},
		"ns a string": {"Bearer " + sign(jwt.MapClaims{"sub": "s", "ns": "a", "exp": exp, "iss": "iss", "aud": "aud"}), "ns claim must be an array"},
		"not JSON":    {"Bearer " + good[:strings.IndexByte(good, '.')] + ".bm90IGpzb24." + "c2ln", "malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			_, err := a.Authenticate(r)
			var ae *Error
			if !errors.Is(err, ErrUnauthenticated) || !errors.As(err, &ae) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.Contains(ae.Reason, tc.reason) {
				t.Fatalf("reason: got %q, want it to mention %q", ae.Reason, tc.reason)
			}
			if len(good) > 20 && strings.Contains(ae.Reason, good[:20]) {
				t.Fatal("the reason quotes the token")
			}
		})
	}
}
