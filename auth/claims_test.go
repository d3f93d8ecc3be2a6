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

// TestNotGranted: a 403's detail says where the token's namespaces come
// from, and lists them.
func TestNotGranted(t *testing.T) {
	for name, tc := range map[string]struct {
		c    Claims
		want string
	}{
		"ns claim":          {Claims{Namespaces: []string{"a", "b-*"}, grants: grants{claim: "ns", hasClaim: true}}, `the token grants namespaces "a", "b-*" (its ns claim), not namespace "demo"`},
		"empty ns claim":    {Claims{grants: grants{claim: "ns", hasClaim: true}}, `the token's ns claim is empty: it grants no namespace, so not namespace "demo"`},
		"no ns claim":       {Claims{grants: grants{claim: "ns"}}, `the token has no ns claim, so it grants no namespace`},
		"policy grants":     {Claims{Namespaces: []string{"ci"}, grants: grants{claim: "ns", policy: true}}, `the gateway's policy grants this token namespaces "ci", not namespace "demo"`},
		"policy, no rule":   {Claims{grants: grants{claim: "ns", policy: true}}, `no rule of the gateway's policy grants it a namespace`},
		"made by hand":      {Claims{Namespaces: []string{"x"}}, `the token grants namespaces "x", not namespace "demo"`},
		"other claim named": {Claims{grants: grants{claim: "lockgate_ns"}}, `the claim must be named exactly lockgate_ns`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.c.NotGranted("demo"); !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
