package locks

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// NewToken returns a fresh owner token: 128 random bits, URL-safe base64.
func NewToken() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails: see crypto/rand.Read.
	return base64.RawURLEncoding.EncodeToString(b)
}

// TokenHash is what backends store instead of the token itself, so that
// whoever can read the store (a dump, MONITOR, SLOWLOG) cannot act as the
// holder. Equal hashes mean equal tokens; comparing hashes in variable time
// leaks nothing useful about the token.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	var s [43]byte // 32 bytes in base64 without padding
	base64.RawURLEncoding.Encode(s[:], sum[:])
	return string(s[:]) // the one allocation
}
