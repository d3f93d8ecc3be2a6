package e2e

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestAuthHS256 covers the bearer token cases on a gateway with an HS256
// secret, an issuer and an audience.
func TestAuthHS256(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--jwt-issuer", "https://issuer.example", "--jwt-audience", "lockgate")
	good := map[string]any{"iss": "https://issuer.example", "aud": "lockgate"}
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	otherKey := func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claims(map[string]any{"sub": "x", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}))).
			SignedString([]byte("another-secret-that-is-32-bytes-long!!"))
		return s
	}
	for name, tc := range map[string]struct {
		header    string // Authorization
		wantError bool   // WWW-Authenticate carries error="invalid_token"
	}{
		"no header":         {header: ""},
		"basic scheme":      {header: "Basic dXNlcjpwYXNz", wantError: true},
		"bearer, no token":  {header: "Bearer ", wantError: true},
		"not a jwt":         {header: "Bearer hello", wantError: true},
		"bad signature":     {header: "Bearer " + otherKey(), wantError: true},
		"tampered payload":  {header: "Bearer " + tamper(token(t, claims(nil))), wantError: true},
		"alg none":          {header: "Bearer " + algNone(t, claims(nil)), wantError: true},
		"HS512":             {header: "Bearer " + signHS(t, jwt.SigningMethodHS512, claims(nil)), wantError: true},
		"expired":           {header: "Bearer " + token(t, claims(map[string]any{"exp": time.Now().Add(-time.Minute).Unix()})), wantError: true},
		"no exp":            {header: "Bearer " + token(t, claims(map[string]any{"exp": nil})), wantError: true},
		"not yet valid":     {header: "Bearer " + token(t, claims(map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})), wantError: true},
		"wrong issuer":      {header: "Bearer " + token(t, claims(map[string]any{"iss": "https://evil.example"})), wantError: true},
		"no issuer":         {header: "Bearer " + token(t, claims(map[string]any{"iss": nil})), wantError: true},
		"wrong audience":    {header: "Bearer " + token(t, claims(map[string]any{"aud": "someone-else"})), wantError: true},
		"no sub":            {header: "Bearer " + token(t, claims(map[string]any{"sub": nil})), wantError: true},
		"ns not an array":   {header: "Bearer " + token(t, claims(map[string]any{"ns": "*"})), wantError: true},
		"10000 dots":        {header: "Bearer " + strings.Repeat(".", 10000), wantError: true},
		"8 KiB+ token":      {header: "Bearer " + strings.Repeat("a", 5000) + "." + strings.Repeat("b", 5000) + ".c", wantError: true},
		"lower-case scheme": {header: "bearer " + token(t, claims(map[string]any{"iss": "nope"})), wantError: true},
	} {
		t.Run(name, func(t *testing.T) {
			var h []string
			if tc.header != "" {
				h = []string{"Authorization", tc.header}
			}
			r := call(t, "POST", gw.URL+"/locks/a/b", "", h...)
			wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
			www := r.header.Get("WWW-Authenticate")
			if !strings.HasPrefix(www, "Bearer") || strings.Contains(www, `error="invalid_token"`) != tc.wantError {
				t.Fatalf("WWW-Authenticate: got %q (want error=invalid_token: %v)", www, tc.wantError)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		r := call(t, "POST", gw.URL+"/locks/a/b", "", bearer(token(t, claims(nil)))...)
		if r.status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", r.status, r.body)
		}
	})
	t.Run("health needs no token", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
			if r := call(t, "GET", gw.URL+p, ""); r.status != http.StatusOK {
				t.Fatalf("GET %s: got %d, want 200", p, r.status)
			}
		}
	})
}

// TestAbsurdAuthorizationHeader: a header past the 64 KiB cap is refused by
// the server before any handler runs.
func TestAbsurdAuthorizationHeader(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	r := call(t, "POST", gw.URL+"/locks/a/b", "", "Authorization", "Bearer "+strings.Repeat("a.", 40<<10))
	if r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status: got %d, want 431", r.status)
	}
}

// TestAuthSaysWhatIsWrong: a refused token's problem names what to fix: a
// claim of the wrong type by its name and the type it must have; a token
// without the ns claim (a misnamed one, say) that it has none; an expired
// one where a new one comes from; a namespace not granted, the namespaces
// that are.
func TestAuthSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	url := gw.URL + "/locks/demo/x"
	for name, tc := range map[string]struct {
		header string
		status int
		want   []string
	}{
		"ns a string":       {"Bearer " + token(t, map[string]any{"ns": "demo"}), 401, []string{"ns claim", "an array of namespace globs", "a string"}},
		"ns of numbers":     {"Bearer " + token(t, map[string]any{"ns": []int{1}}), 401, []string{"ns claim", "an array of namespace globs"}},
		"sub a number":      {"Bearer " + token(t, map[string]any{"sub": 42}), 401, []string{"sub claim", "a string", "a number"}},
		"ns_admin a string": {"Bearer " + token(t, map[string]any{"ns_admin": "demo"}), 401, []string{"ns_admin claim", "an array of namespace globs"}},
		"exp a string":      {"Bearer " + token(t, map[string]any{"exp": "tomorrow"}), 401, []string{"exp claim", "a number"}},
		"misnamed ns":       {"Bearer " + token(t, map[string]any{"ns": nil, "namespaces": []string{"demo"}}), 403, []string{"no ns claim", `["demo"]`}},
		"other namespaces":  {"Bearer " + token(t, map[string]any{"ns": []string{"billing", "etl-*"}}), 403, []string{`"demo"`, `"billing", "etl-*"`}},
		"expired":           {"Bearer " + token(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}), 401, []string{"expired", "new token", "lockctl token"}},
		"empty bearer":      {"Bearer ", 401, []string{"no token"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", url, "", "Authorization", tc.header)
			code := map[int]string{401: "unauthorized", 403: "forbidden"}[tc.status]
			p := wantProblem(t, r, tc.status, code)
			for _, w := range tc.want {
				if !strings.Contains(p.Detail, w) {
					t.Errorf("detail %q lacks %q", p.Detail, w)
				}
			}
		})
	}
}

// TestNamespaceGrants: a token's ns globs must match the whole namespace.
func TestNamespaceGrants(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	for name, tc := range map[string]struct {
		globs   []string
		ns      string
		allowed bool
	}{
		"exact":                 {[]string{"billing"}, "billing", true},
		"exact is not a prefix": {[]string{"a"}, "ab", false},
		"not a suffix either":   {[]string{"b"}, "ab", false},
		"prefix glob":           {[]string{"etl-*"}, "etl-daily", true},
		"prefix glob, bare":     {[]string{"etl-*"}, "etl", false},
		"prefix glob, empty":    {[]string{"etl-*"}, "etl-", true},
		"prefix glob, inside":   {[]string{"etl-*"}, "xetl-daily", false},
		"suffix glob":           {[]string{"*-prod"}, "billing-prod", true},
		"suffix glob, other":    {[]string{"*-prod"}, "billing-prod2", false},
		"middle glob":           {[]string{"a*z"}, "abcz", true},
		"star":                  {[]string{"*"}, "anything_at-all", true},
		"second glob":           {[]string{"billing", "etl-*"}, "etl-x", true},
		"no globs":              {[]string{}, "billing", false},
		"empty glob":            {[]string{""}, "billing", false},
		"case matters":          {[]string{"Billing"}, "billing", false},
		"question mark literal": {[]string{"bil?ing"}, "billing", false},
		"regexp is not a glob":  {[]string{"bill.*"}, "billing", false},
	} {
		t.Run(name, func(t *testing.T) {
			auth := bearer(token(t, map[string]any{"ns": tc.globs}))
			url := gw.URL + "/locks/" + tc.ns + "/x"
			r := call(t, "POST", url, "", auth...)
			if !tc.allowed {
				p := wantProblem(t, r, http.StatusForbidden, "forbidden")
				if !strings.Contains(p.Detail, tc.ns) {
					t.Fatalf("detail %q does not name the namespace", p.Detail)
				}
				// Every operation checks the grant.
				wantProblem(t, call(t, "GET", url, "", auth...), http.StatusForbidden, "forbidden")
				wantProblem(t, call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", "t"})...), http.StatusForbidden, "forbidden")
				wantProblem(t, call(t, "PUT", url+"/lease", "", with(auth, []string{"Lock-Token", "t"})...), http.StatusForbidden, "forbidden")
				return
			}
			var g grant
			wantJSON(t, r, http.StatusCreated, &g)
		})
	}
}

// TestAuthPublicKeys: a gateway with a PEM file of RSA, ECDSA and Ed25519
// keys accepts RS256, ES256 and EdDSA tokens, and refuses an HS256 token
// whose "secret" is the public key file (the algorithm confusion attack).
func TestAuthPublicKeys(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var pemData []byte
	for _, pub := range []any{&rsaKey.PublicKey, &ecKey.PublicKey, edPub} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	keyFile := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(keyFile, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_PUBLIC_KEY_FILE": keyFile})

	claims := jwt.MapClaims{"sub": "svc", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(m jwt.SigningMethod, key any) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatalf("sign %s: %v", m.Alg(), err)
		}
		return s
	}
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"RS256":                        {sign(jwt.SigningMethodRS256, rsaKey), true},
		"ES256":                        {sign(jwt.SigningMethodES256, ecKey), true},
		"EdDSA":                        {sign(jwt.SigningMethodEdDSA, edKey), true},
		"RS256 from another key":       {sign(jwt.SigningMethodRS256, otherRSA), false},
		"HS256 keyed with the PEM":     {sign(jwt.SigningMethodHS256, pemData), false},
		"HS256 with the gateway's old": {sign(jwt.SigningMethodHS256, []byte(secret)), false},
		"PS256 with the RSA key":       {sign(jwt.SigningMethodPS256, rsaKey), false},
		"alg none":                     {algNone(t, claims), false},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", gw.URL+"/locks/pk/"+strings.ReplaceAll(name, " ", "-"), "", bearer(tc.token)...)
			if tc.ok {
				if r.status != http.StatusCreated {
					t.Fatalf("got %d %s, want 201", r.status, r.body)
				}
				return
			}
			wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		})
	}
}

// algNone returns an unsigned token ("alg": "none").
func algNone(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatalf("sign none: %v", err)
	}
	return s
}

func signHS(t *testing.T, m jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "tester", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	s, err := jwt.NewWithClaims(m, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// tamper swaps the payload of tok for one granting more, keeping the
// signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"root","ns":["*"],"exp":9999999999}`))
	return strings.Join(parts, ".")
}
