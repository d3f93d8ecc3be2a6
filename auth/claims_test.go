package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signRaw signs payload, a JSON text kept byte for byte (duplicate keys,
// odd spellings), as an HS256 token with the test secret.
func signRaw(t *testing.T, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestClaimNamesExact: claims are read by their exact names. encoding/json
// folds case (and "ſ" to "s") when it fills a struct, and keeps the last of
// duplicate keys, so "NS", "nſ" or a second "ns" granted namespaces and
// "EXP" stood for exp.
func TestClaimNamesExact(t *testing.T) {
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for name, tc := range map[string]struct {
		payload string
		wantErr string   // refused with an *Error whose reason says this
		wantNS  []string // else the namespaces granted
	}{
		"ns":               {payload: `{"sub":"s","exp":` + exp + `,"ns":["a"]}`, wantNS: []string{"a"}},
		"NS":               {payload: `{"sub":"s","exp":` + exp + `,"NS":["*"]}`},
		"Ns":               {payload: `{"sub":"s","exp":` + exp + `,"Ns":["*"]}`},
		"long s":           {payload: `{"sub":"s","exp":` + exp + `,"nſ":["*"]}`},
		"EXP only":         {payload: `{"sub":"s","EXP":` + exp + `,"ns":["a"]}`, wantErr: "exp"},
		"SUB only":         {payload: `{"SUB":"s","exp":` + exp + `,"ns":["a"]}`, wantErr: "sub"},
		"ns twice":         {payload: `{"sub":"s","exp":` + exp + `,"ns":["a"],"ns":["*"]}`, wantErr: "twice"},
		"sub twice":        {payload: `{"sub":"s","exp":` + exp + `,"sub":"root","ns":["a"]}`, wantErr: "twice"},
		"escaped ns twice": {payload: `{"sub":"s","exp":` + exp + `,"ns":["a"],"n\u0073":["*"]}`, wantErr: "twice"},
		"nested twice":     {payload: `{"sub":"s","exp":` + exp + `,"ns":["a"],"x":{"y":1,"y":2}}`, wantErr: "twice"},
		"trailing object":  {payload: `{"sub":"s","exp":` + exp + `,"ns":["a"]}{"ns":["*"]}`, wantErr: "malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "Bearer "+signRaw(t, tc.payload))
			c, err := a.Authenticate(r)
			if tc.wantErr != "" {
				var ae *Error
				if !errors.As(err, &ae) || !strings.Contains(ae.Reason, tc.wantErr) {
					t.Fatalf("got claims %+v, error %v; want an *Error saying %q", c, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want claims", err)
			}
			if len(c.Namespaces) != len(tc.wantNS) || (len(tc.wantNS) > 0 && c.Namespaces[0] != tc.wantNS[0]) {
				t.Fatalf("namespaces: got %q, want %q", c.Namespaces, tc.wantNS)
			}
		})
	}
}
