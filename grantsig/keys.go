package grantsig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Key is one Ed25519 key of the set: a private one can sign.
type Key struct {
	// ID is the key's RFC 7638 thumbprint: what a signature's kid names.
	ID      string
	Public  ed25519.PublicKey
	private ed25519.PrivateKey
}

// CanSign reports whether the key has its private half.
func (k Key) CanSign() bool { return k.private != nil }

// newKey makes the Key of pub (and priv, when known).
func newKey(pub ed25519.PublicKey, priv ed25519.PrivateKey) Key {
	return Key{ID: thumbprint(pub), Public: pub, private: priv}
}

// thumbprint is the RFC 7638 thumbprint of an Ed25519 public key: the
// SHA-256 of its JWK's required members, in lexical order, with no spaces.
func thumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64(pub) + `"}`))
	return b64(sum[:])
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Generate makes a fresh signing key.
func Generate() (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("generate a grant signing key: %w", err)
	}
	return newKey(pub, priv), nil
}

// LoadFile reads a PEM file of Ed25519 keys: "PRIVATE KEY" blocks
// (PKCS#8) and "PUBLIC KEY" blocks (PKIX), in order. The first block must
// be a private key: it signs.
func LoadFile(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("grant signing keys: %w", err)
	}
	keys, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("grant signing keys in %s: %w", path, err)
	}
	return keys, nil
}

// Parse reads PEM-encoded Ed25519 keys, as LoadFile does.
func Parse(data []byte) ([]Key, error) {
	var keys []Key
	seen := map[string]bool{}
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var k Key
		switch block.Type {
		case "PRIVATE KEY":
			parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", n, err)
			}
			priv, ok := parsed.(ed25519.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("block %d: a %T, want an Ed25519 key", n, parsed)
			}
			k = newKey(priv.Public().(ed25519.PublicKey), priv)
		case "PUBLIC KEY":
			parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", n, err)
			}
			pub, ok := parsed.(ed25519.PublicKey)
			if !ok {
				return nil, fmt.Errorf("block %d: a %T, want an Ed25519 key", n, parsed)
			}
			k = newKey(pub, nil)
		default:
			return nil, fmt.Errorf("block %d: a %q, want PRIVATE KEY or PUBLIC KEY", n, block.Type)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("block %d: key %s appears twice", n, k.ID)
		}
		seen[k.ID] = true
		keys = append(keys, k)
	}
	switch {
	case len(keys) == 0:
		return nil, errors.New("no PEM block")
	case !keys[0].CanSign():
		return nil, errors.New("the first key must be a private key: it signs")
	}
	return keys, nil
}

// EncodePrivate returns k as a PEM "PRIVATE KEY" block (PKCS#8), and
// EncodePublic its public half as a "PUBLIC KEY" block: what LoadFile reads.
func EncodePrivate(k Key) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublic returns the public half of k as a PEM "PUBLIC KEY" block.
func EncodePublic(k Key) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k.Public)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// jwk is one key of the published set (RFC 8037 section 2).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// jwkSet encodes the public halves of keys as a JWK Set.
func jwkSet(keys []Key) []byte {
	set := struct {
		Keys []jwk `json:"keys"`
	}{}
	for _, k := range keys {
		set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: b64(k.Public), Kid: k.ID, Alg: "EdDSA", Use: "sig"})
	}
	data, _ := json.Marshal(set) // strings only: never fails
	return append(data, '\n')
}
