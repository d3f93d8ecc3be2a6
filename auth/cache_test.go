package auth

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestCachedTokenStillExpires: a token verified once is remembered, but
// not past its exp, and a token that failed is never remembered.
func TestCachedTokenStillExpires(t *testing.T) {
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(1100 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "s", "ns": []string{"*"}, "exp": exp.Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	authenticate := func(token string) error {
		r := httptest.NewRequest("GET", "/locks/a/b", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		_, err := a.Authenticate(r)
		return err
	}
	forged := tok[:strings.LastIndex(tok, ".")+1] + "AAAA"
	for range 2 { // the second time from the cache
		if err := authenticate(tok); err != nil {
			t.Fatalf("valid token: %v", err)
		}
		if err := authenticate(forged); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("forged signature: got %v, want ErrUnauthenticated", err)
		}
	}
	for !time.Now().After(exp) { // wait out the token's life
		time.Sleep(20 * time.Millisecond)
	}
	if err := authenticate(tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("expired token after caching: got %v, want ErrUnauthenticated", err)
	}
}
