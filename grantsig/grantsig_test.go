package grantsig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestThumbprint: the key id is RFC 7638's thumbprint, checked against the
// Ed25519 example of RFC 8037, appendix A.3.
func TestThumbprint(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got, want := thumbprint(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("thumbprint: got %s, want %s", got, want)
	}
}

// TestSignVerifies: a signed grant verifies with golang-jwt against the
// published JWK Set, carries what was signed, and fails with any other key.
func TestSignVerifies(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Generate()
	s, err := NewSigner("lockgate-test", []Key{k, newKey(other.Public, nil)})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_764_652_800_123)
	jws := s.Sign(Grant{Lock: "team/job", Subject: `https://idp#ci "bot"`, FencingToken: 1_764_652_800_000_042,
		Mode: ModeExclusive, IssuedAt: at, LeaseEnd: at.Add(30*time.Second + 7*time.Millisecond)})
	if n := s.Signed(); n != 1 {
		t.Fatalf("Signed: got %d, want 1", n)
	}

	var set struct {
		Keys []struct{ Kty, Crv, X, Kid, Alg, Use string }
	}
	if err := json.Unmarshal(s.JWKS(), &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("JWKS %s: %v", s.JWKS(), err)
	}
	if set.Keys[0].Kid != k.ID || set.Keys[1].Kid != other.ID || set.Keys[0].Alg != "EdDSA" || set.Keys[0].Crv != "Ed25519" {
		t.Fatalf("JWKS %s", s.JWKS())
	}
	keyOf := func(kid string) ed25519.PublicKey {
		for _, j := range set.Keys {
			if j.Kid == kid {
				x, _ := base64.RawURLEncoding.DecodeString(j.X)
				return x
			}
		}
		return nil
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(jws, claims, func(tok *jwt.Token) (any, error) {
		if tok.Header["typ"] != Type {
			t.Errorf("typ %v", tok.Header["typ"])
		}
		return keyOf(tok.Header["kid"].(string)), nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(func() time.Time { return at }))
	if err != nil || !tok.Valid {
		t.Fatalf("verify %s: %v", jws, err)
	}
	// exp is the lease end to the millisecond (golang-jwt rounds it to
	// seconds unless told otherwise: check the number).
	exp, _ := claims["exp"].(float64)
	if claims["lock"] != "team/job" || claims["sub"] != `https://idp#ci "bot"` || claims["mode"] != "exclusive" ||
		claims["iss"] != "lockgate-test" || int64(exp*1000+0.5) != at.Add(30*time.Second+7*time.Millisecond).UnixMilli() {
		t.Fatalf("claims %v", claims)
	}
	// The fencing token has 16 digits: a JSON number an int64 and a
	// float64 both hold exactly (below 2^53).
	p, _ := base64.RawURLEncoding.DecodeString(strings.Split(jws, ".")[1])
	if !bytes.Contains(p, []byte(`"fencing_token":1764652800000042,`)) {
		t.Fatalf("payload %s", p)
	}

	// Signed by another key, under the same kid: rejected.
	forged := strings.Split(jws, ".")
	forged[2] = b64(ed25519.Sign(other.private, []byte(forged[0]+"."+forged[1])))
	if _, err := jwt.Parse(strings.Join(forged, "."), func(*jwt.Token) (any, error) { return keyOf(k.ID), nil },
		jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(func() time.Time { return at })); err == nil {
		t.Fatal("a signature by another key verified")
	}
	// After the lease end: expired.
	if _, err := jwt.Parse(jws, func(*jwt.Token) (any, error) { return keyOf(k.ID), nil },
		jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(func() time.Time { return at.Add(31 * time.Second) })); err == nil {
		t.Fatal("a grant verified after its lease ended")
	}
}

// TestParse: the key file's blocks, and what it refuses.
func TestParse(t *testing.T) {
	a, _ := Generate()
	b, _ := Generate()
	privA, _ := EncodePrivate(a)
	privB, _ := EncodePrivate(b)
	pubB, _ := EncodePublic(b)
	keys, err := Parse(append(append([]byte{}, privA...), pubB...))
	if err != nil || len(keys) != 2 || keys[0].ID != a.ID || !keys[0].CanSign() || keys[1].ID != b.ID || keys[1].CanSign() {
		t.Fatalf("got %v, %v", keys, err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	for name, data := range map[string][]byte{
		"empty":          nil,
		"public first":   append(append([]byte{}, pubB...), privA...),
		"twice":          append(append(append([]byte{}, privA...), privB...), privA...),
		"not Ed25519":    ecPEM,
		"RSA block":      []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"),
		"corrupt PKCS#8": []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
	} {
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	k, _ := Generate()
	s, _ := NewSigner("lockgate", []Key{k})
	g := Grant{Lock: "team/job", Subject: "iss#sub", FencingToken: 1_764_652_800_000_042, Mode: ModeExclusive,
		IssuedAt: time.Now(), LeaseEnd: time.Now().Add(30 * time.Second)}
	for b.Loop() {
		s.Sign(g)
	}
}
