// Package jwtsecret says whether a value can be an HS256 secret: the one
// rule that the gateway (through auth.CheckSecret) and lockctl token
// both apply, so that lockctl never mints tokens for a key the gateway
// refuses.
package jwtsecret

import (
	"errors"
	"fmt"
	"strings"
)

// MinLen is the shortest HS256 secret accepted: RFC 7518 asks for a key at
// least as long as the hash.
const MinLen = 32

// minDistinct is the fewest distinct bytes an HS256 secret may
// have. It refuses the obvious (one repeated byte, "secret" or "password"
// repeated) and never a random secret of 32 bytes or more: 32 random hex
// digits have at least 9 distinct ones but about once in 20,000 draws, and
// fewer than 8 essentially never. A threshold of 16, the hex alphabet,
// would refuse about a quarter of `openssl rand -hex 32` outputs, which
// lack one digit or more.
const minDistinct = 8

// Check says whether secret, a key given as bytes, can be an HS256 key.
// It refuses, without quoting the secret, fewer than MinLen bytes, and
// obviously weak secrets that pass the length check: fewer than 8 distinct
// bytes, or a shorter block repeated.
func Check(secret []byte) error {
	if len(secret) < MinLen {
		return fmt.Errorf("the JWT secret must be at least %d bytes", MinLen)
	}
	var seen [256]bool
	distinct := 0
	for _, b := range secret {
		if !seen[b] {
			seen[b] = true
			distinct++
		}
	}
	if distinct < minDistinct {
		return fmt.Errorf("the JWT secret is too weak: %d distinct bytes, want at least %d; use a random one, e.g. openssl rand -hex 32", distinct, minDistinct)
	}
	if p := period(secret); p <= len(secret)/2 {
		return fmt.Errorf("the JWT secret is too weak: a block of %d bytes repeats; use a random one, e.g. openssl rand -hex 32", p)
	}
	return nil
}

// CheckText is Check for a secret read as text (an environment variable,
// a flag, a file), which also must not begin or end with whitespace: most
// often the newline of a file or of echo. Refused rather than trimmed:
// whoever signs tokens with the same value (lockctl token, another
// service) would use the untrimmed bytes, and every token would fail with
// a 401 that names no cause. A key given as bytes may hold any byte, at
// either end too (a random key does about once in twenty).
func CheckText(secret string) error {
	if strings.TrimSpace(secret) != secret {
		return errors.New("the JWT secret begins or ends with whitespace (a newline from a file or echo?); remove it: it is not trimmed, since tokens signed elsewhere would use it as is")
	}
	return Check([]byte(secret))
}

// period is the length of the shortest block that b repeats, whole or in
// part at the end; len(b) when b repeats nothing. Knuth-Morris-Pratt's
// failure function gives it in one pass.
func period(b []byte) int {
	fail := make([]int, len(b))
	for i, k := 1, 0; i < len(b); i++ {
		for k > 0 && b[i] != b[k] {
			k = fail[k-1]
		}
		if b[i] == b[k] {
			k++
		}
		fail[i] = k
	}
	return len(b) - fail[len(b)-1]
}
