package auth

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzAuthenticate: whatever the Authorization header, Authenticate never
// panics, refuses with an *Error that does not quote the token, and
// accepts only a well-formed Bearer JWT with a subject.
func FuzzAuthenticate(f *testing.F) {
	secret := []byte(testSecret)
	sign := func(m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	exp := time.Now().Add(24 * time.Hour).Unix()
	valid := sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "fuzz", "ns": []string{"a", "etl-*"}, "exp": exp})
	head, rest, _ := strings.Cut(valid, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	for _, seed := range []string{
		"Bearer " + valid,
		"bearer " + valid,
		"Bearer  " + valid + " ",
		"Bearer " + none + "." + payload + ".",
		"Bearer " + head + "." + payload + "." + sig + "x",
		"Bearer " + sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "fuzz", "exp": 1}),
		"Bearer " + sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "", "exp": exp}),
		"Bearer " + sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "fuzz"}),
		"Bearer " + sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "fuzz", "exp": exp, "ns": "not-an-array"}),
		"Bearer " + sign(jwt.SigningMethodHS384, secret, jwt.MapClaims{"sub": "fuzz", "exp": exp}),
		"Bearer " + strings.Repeat(".", 10000),
		"Bearer " + strings.Repeat("a", MaxTokenLen+1),
		"Bearer ..",
		"Bearer a.b.c",
		"Basic dXNlcjpwYXNz",
		"Bearer",
		"",
		"Bearer \x00.\x00.\x00",
		"Bearer " + head + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x","exp":1e400}`)) + "." + sig,
	} {
		f.Add(seed)
	}
	a, err := NewAuthenticator(Config{Secret: secret})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/locks/a/b", nil)
		r.Header.Set("Authorization", header)
		c, err := a.Authenticate(r)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("got %T %v, want an *Error", err, err)
			}
			_, tok, _ := strings.Cut(header, " ")
			if tok = strings.TrimSpace(tok); len(tok) > 8 && strings.Contains(ae.Reason, tok) {
				t.Fatalf("the reason %q quotes the token", ae.Reason)
			}
			return
		}
		scheme, tok, _ := strings.Cut(header, " ")
		tok = strings.TrimSpace(tok)
		switch {
		case !strings.EqualFold(scheme, "Bearer"):
			t.Fatalf("accepted scheme %q", scheme)
		case len(tok) > MaxTokenLen || strings.Count(tok, ".") != 2:
			t.Fatalf("accepted a token that is not a JWT: %q", tok)
		case c.Subject == "":
			t.Fatal("accepted a token without a subject")
		}
		// Whatever was accepted must verify as HS256 with the secret on its
		// own, without lockgate's parser options.
		if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()); err != nil {
			t.Fatalf("accepted a token that does not verify: %v", err)
		}
	})
}
