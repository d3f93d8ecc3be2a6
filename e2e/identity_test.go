package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawToken signs payload, a JSON text kept byte for byte (duplicate keys,
// odd spellings), as an HS256 token with the test secret.
func rawToken(payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestClaimNamesExact: only a claim spelled "ns" grants namespaces and
// only "exp" is the expiry; a payload that names a key twice is refused.
func TestClaimNamesExact(t *testing.T) {
	gw := startGateway(t)
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for name, tc := range map[string]struct {
		payload string
		status  int
		code    string
	}{
		"ns":       {`{"sub":"s","exp":` + exp + `,"ns":["exact"]}`, http.StatusCreated, ""},
		"NS":       {`{"sub":"s","exp":` + exp + `,"NS":["exact"]}`, http.StatusForbidden, "forbidden"},
		"Ns":       {`{"sub":"s","exp":` + exp + `,"Ns":["exact"]}`, http.StatusForbidden, "forbidden"},
		"long s":   {`{"sub":"s","exp":` + exp + `,"nſ":["exact"]}`, http.StatusForbidden, "forbidden"},
		"EXP":      {`{"sub":"s","EXP":` + exp + `,"ns":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
		"ns twice": {`{"sub":"s","exp":` + exp + `,"ns":["other"],"ns":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
		"escaped":  {`{"sub":"s","exp":` + exp + `,"ns":["other"],"n\u0073":["exact"]}`, http.StatusUnauthorized, "unauthorized"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", gw.URL+"/locks/exact/"+strings.ReplaceAll(name, " ", "-"), "", bearer(rawToken(tc.payload))...)
			if tc.code == "" {
				if r.status != tc.status {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tc.status)
				}
				return
			}
			wantProblem(t, r, tc.status, tc.code)
		})
	}
}
