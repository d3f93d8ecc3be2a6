package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

func algFor(k crypto.PublicKey) (string, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return "", fmt.Errorf("RSA public key of %d bits: at least 2048 are required", k.N.BitLen())
		}
		return jwt.SigningMethodRS256.Alg(), nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA public key on %s: only P-256 (ES256) is supported", k.Curve.Params().Name)
		}
		return jwt.SigningMethodES256.Alg(), nil
	case ed25519.PublicKey:
		return jwt.SigningMethodEdDSA.Alg(), nil
	default:
		return "", fmt.Errorf("unsupported public key type %T", k)
	}
}

// ParsePublicKeys reads every PEM block of data: "PUBLIC KEY" (PKIX: RSA,
// ECDSA P-256 or Ed25519) or "RSA PUBLIC KEY" (PKCS #1).
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var k crypto.PublicKey
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			k, err = x509.ParsePKCS1PublicKey(block.Bytes)
		default:
			return nil, fmt.Errorf("PEM block %q: want PUBLIC KEY or RSA PUBLIC KEY", block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", len(keys)+1, err)
		}
		if _, err := algFor(k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}
