package middleware

import "github.com/lockgate/lockgate/internal/jwtsecret"

// CheckSecret says whether secret can be an HS256 key; NewAuthenticator
// calls it. It refuses, without quoting the secret: fewer than MinSecretLen
// bytes; leading or trailing whitespace (most often the newline of a file
// or of echo; refused rather than trimmed, since whoever signs tokens with
// the same value would use the untrimmed bytes, and every token would fail
// with a 401 that names no cause); fewer than 8 distinct bytes, or a
// shorter block repeated.
func CheckSecret(secret []byte) error { return jwtsecret.Check(secret) }
